// The fixture files below a path (fixture.h: fixture_files).
#include <algorithm>
#include <filesystem>

#include "h5/fixture.h"

namespace conform::h5 {

namespace fs = std::filesystem;

std::vector<std::string> fixture_files(const std::string& path) {
    std::error_code ec;
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) throw InputError(path + ": no such file or directory");
    if (!fs::is_directory(st)) return {path};
    std::vector<std::string> files;
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) throw InputError(path + ": cannot list: " + ec.message());
    for (; it != end; it.increment(ec)) {
        if (ec) throw InputError(path + ": cannot list: " + ec.message());
        const fs::path& p = it->path();
        const std::string name = p.filename().string();
        if (!name.empty() && name[0] == '.') {  // hidden, and our own temporary files
            if (it->is_directory(ec)) it.disable_recursion_pending();
            continue;
        }
        const std::string ext = p.extension().string();
        if ((ext == ".h5" || ext == ".hdf5") && it->is_regular_file(ec)) files.push_back(p.string());
    }
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace conform::h5
