// One lock for what more than one thread writes to conform's stderr: the
// progress line (the run's thread) and each worker's relayed stderr (a thread
// per worker, worker/process.cpp). Each writer composes its whole line first
// and writes it under this lock, so a relayed line is never cut in two by a
// progress update (on a terminal that cut also broke the `  worker[NAME] | `
// prefix apart from the line it marks).
#pragma once

#include <mutex>

namespace conform {

inline std::mutex& stderr_mutex() {
    static std::mutex m;
    return m;
}

}  // namespace conform
