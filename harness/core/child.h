// harness/core/child.h — run a piece of code in a forked child with a time
// limit, so that a crash, a hang or an exit() in it (foreign code, or a
// library that is not memory-safe on damaged input, like HDF5 1.10) becomes
// a result with a precise message instead of the end of conform.
//
// The body's return value (or its exception's message) comes back through a
// shared mapping, truncated to 4 KiB. The child never outlives the parent
// (PR_SET_PDEATHSIG), writes no core file, and leaves by _exit (the parent's
// atexit handlers and static destructors are not its to run).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace conform::child {

struct ChildResult {
    enum Kind { returned, threw, crashed, exited, timed_out, fork_failed } kind = returned;
    int code = 0;      // crashed: the signal; exited: the status; fork_failed: errno
    std::string text;  // returned: body's result; threw: the exception's message
};

struct Options {
    double timeout_s = 60;       // a child still running then is killed (SIGKILL)
    bool quiet_stderr = false;   // the child's stderr to /dev/null (a sanitizer's crash report is ours to summarise)
    // > 0: the child may map at most this many bytes more than it inherited
    // (RLIMIT_AS over the parent's own address space); past it an allocation
    // fails (std::bad_alloc: "threw") or the library aborts ("crashed").
    int64_t memory_bytes = 0;
};

ChildResult run_in_child(const std::function<std::string()>& body, const Options& o);
inline ChildResult run_in_child(const std::function<std::string()>& body, double timeout_s) {
    return run_in_child(body, Options{timeout_s, false});
}

// "crashed with signal 11 (SIGSEGV) in rope", "timed out after 60 s in rope", ...
// for every kind but returned and threw.
std::string describe(const ChildResult& r, const std::string& what, double timeout_s);

// An anonymous MAP_SHARED mapping: written by a child, read by the parent. Owning; neither copied nor moved.
class SharedMapping {
   public:
    explicit SharedMapping(size_t bytes);  // throws std::runtime_error when the mapping fails
    ~SharedMapping();
    SharedMapping(const SharedMapping&) = delete;
    SharedMapping& operator=(const SharedMapping&) = delete;

    char* base() const { return base_; }
    size_t size() const { return size_; }

   private:
    char* base_ = nullptr;
    size_t size_ = 0;
};

size_t page_size();
size_t round_up(size_t n, size_t to);

}  // namespace conform::child
