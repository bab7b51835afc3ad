// harness/core/pattern.h — a regular expression matched in time linear in
// the text (Thompson's construction: every NFA state advanced in lockstep),
// for --params. std::regex backtracks: `(a*)*b` takes exponential time per
// case id, and 30,000 nested groups overflow its recursive compiler.
//
// The syntax is ECMAScript's without the parts that need backtracking:
// literals, `.`, classes `[a-z_]` `[^,]`, escapes `\d \w \s \D \W \S \b \B`
// and escaped punctuation, anchors `^ $`, groups `( )` and `(?: )`,
// alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after one
// is accepted: it cannot change whether a text matches), and lookaheads
// `(?=X)` `(?!X)` ("ids without positions=": `^rope\((?!.*positions=)`),
// each evaluated once per position of the text, so a search stays
// polynomial: O(|pattern| · |text|²) at worst. Back-references and
// lookbehinds are refused by name.
#pragma once

#include <bitset>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conform {

struct PatternError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

class Pattern {
public:
    // Bounds on what a pattern may cost before any text is matched.
    static constexpr size_t kMaxLength = 4096;   // characters
    static constexpr int kMaxNesting = 64;       // groups inside groups
    static constexpr size_t kMaxProgram = 20000; // instructions, after {n,m} copies

    // Throws PatternError saying what is wrong and at which character.
    explicit Pattern(std::string_view pattern);
    // Whether the pattern matches anywhere in text (a search, as std::regex_search).
    bool search(std::string_view text) const;

    enum class Op : uint8_t { set, split, jump, line_start, line_end, word_boundary, not_word_boundary, look, match };
    struct Inst {
        Op op = Op::match;
        int x = 0, y = 0;         // split: both branches; jump: x; look: the program, y 1 when negated
        std::bitset<256> chars;   // set: the bytes it takes
    };
    using Program = std::vector<Inst>;

private:
    // Whether program p matches text from position `start` (anywhere after it
    // unless anchored). memo: a lookahead's answer per program and position.
    bool run(size_t p, std::string_view text, size_t start, bool anchored, std::vector<int8_t>& memo) const;

    std::vector<Program> progs_;  // [0]: the pattern; then one per lookahead
};

}  // namespace conform
