// harness/h5/handle.h — owning HDF5 identifiers, and HDF5 errors in our words.
//
// Internal to harness/h5: the only code that includes hdf5.h.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

namespace conform::h5 {

// One move-only owner per HDF5 id kind. Copyable scoped handles double-close
// (VTK's), reference counting (HighFive's H5Iinc_ref) is more than a reader
// that opens, reads and closes needs.
template <herr_t (*Close)(hid_t)>
class Handle {
   public:
    Handle() = default;
    explicit Handle(hid_t id) : id_(id) {}
    Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = std::exchange(o.id_, H5I_INVALID_HID);
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }

    hid_t get() const { return id_; }
    explicit operator bool() const { return id_ >= 0; }
    void reset() {
        if (id_ >= 0) Close(id_);
        id_ = H5I_INVALID_HID;
    }
    // Closes now and reports whether closing succeeded (a file's close is
    // where buffered metadata reaches the disk, so the writer must know).
    bool close() {
        const hid_t id = std::exchange(id_, H5I_INVALID_HID);
        return id < 0 || Close(id) >= 0;
    }

   private:
    hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropList = Handle<H5Pclose>;
using Object = Handle<H5Oclose>;

// Turns HDF5's automatic error printing off for the scope and restores it
// after: a bad file is reported once, by us, with file, case and field.
class Silence {
   public:
    Silence() {
        H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    }
    ~Silence() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
    Silence(const Silence&) = delete;
    Silence& operator=(const Silence&) = delete;

   private:
    H5E_auto2_t func_ = nullptr;
    void* data_ = nullptr;
};

// The innermost message on HDF5's error stack (where the library detected
// the problem: "truncated file: eof = ...", "incorrect metadata checksum ..."),
// or "" when the stack is empty. Clears the stack.
std::string last_error();

// A readable name for a datatype: "float32", "int64", "string", "compound".
std::string type_name(hid_t type);

// HDF5's own words for the last failure, after ours: " (HDF5: ...)", or "".
std::string because();

}  // namespace conform::h5
