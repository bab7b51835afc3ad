// harness/worker/process.h — a worker process: spawned fresh (fork, then at
// once exec: nothing of the judge's memory survives into it), with pipes for
// its stdin, stdout and stderr and no other file descriptor, in its own
// process group (killed as a whole), dying with conform (PR_SET_PDEATHSIG).
// What it may do once running is sandbox.h's business: every worker is
// started through `conform-worker`, which limits and sandboxes itself before
// it loads a plugin or execs a command.
//
// Its stderr is relayed by a thread: each line prefixed `  worker[NAME] | `
// and stripped of control characters, so it can neither pass for conform's
// own output nor move the cursor; the last lines are kept for messages.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conform::worker {

class Process {
   public:
    // Starts argv[0] (looked up on PATH when it has no slash). Throws
    // std::runtime_error when it cannot be started (the message says why).
    static Process spawn(const std::vector<std::string>& argv, const std::string& label);
    // A worker conform did not start (--impl-fd): the process that started
    // conform serves on two descriptors it handed over. There is no pid to
    // sandbox, limit, kill or restart and no stderr to relay; kill() closes
    // the descriptors (the peer sees the end of its stream), and the
    // Process owns them from here on. Throws std::runtime_error when a
    // descriptor is not open or not open for the direction it serves.
    static Process attach(int from_worker, int to_worker, const std::string& label);

    Process(Process&&) noexcept;
    Process& operator=(Process&&) noexcept;
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    ~Process();  // kills the group and reaps

    int to_worker() const;    // its stdin
    int from_worker() const;  // its stdout
    pid_t pid() const;        // -1 when attached
    bool attached() const;

    // SIGKILL to the whole process group, then reaps the worker.
    void kill();
    // Whether it has ended (reaped), without waiting.
    bool ended();
    // Waits up to `seconds` for it to end by itself.
    bool wait(double seconds);
    // "exited with status 3", "was killed by signal 6 (SIGABRT)", "still running".
    std::string how_it_ended() const;
    // The last lines it wrote to stderr, joined with newlines (at most ~20).
    std::string stderr_tail() const;
    // The prefix its stderr lines get (set once its name is known).
    void set_label(const std::string& label);

   private:
    struct State;
    explicit Process(std::unique_ptr<State> s);
    std::unique_ptr<State> s_;
};

// Text from a worker as the judge may print or store it: one line (newlines
// become " / "), no control characters, valid UTF-8, at most max_bytes of
// the original (then "... (N more bytes)"). Everything a worker says — an
// error message, a traceback, a reason, a name in a complaint — passes
// through here, so it can neither add lines to conform's output (a forged
// summary) nor break a report format.
std::string clean_text(const std::string& text, size_t max_bytes = 2000);

// Makes the judge itself non-dumpable (no ptrace, no /proc/<pid>/mem for a
// process without CAP_SYS_PTRACE) and ignores SIGPIPE (a dead worker's pipe
// is an error to report, not a signal to die of). Called once at startup.
void protect_judge();

}  // namespace conform::worker
