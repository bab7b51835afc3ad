#include "core/pattern.h"

#include <memory>

namespace conform {

namespace {

using Set = std::bitset<256>;

// The parsed pattern: a tree whose depth is bounded by kMaxNesting (each
// group adds at most three levels: alternation, concatenation, repeat).
struct Node {
    enum Kind { empty, set, assert_, concat, alt, repeat, group, look } kind = empty;
    bool negated = false;  // look: (?!X)
    Set chars;
    Pattern::Op assertion = Pattern::Op::match;
    std::vector<std::unique_ptr<Node>> kids;
    int min = 0, max = -1;  // repeat: max -1 is unbounded
};

Set word_chars() {
    Set s;
    for (int c = 0; c < 256; ++c)
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') s.set(c);
    return s;
}
Set digit_chars() {
    Set s;
    for (int c = '0'; c <= '9'; ++c) s.set(c);
    return s;
}
Set space_chars() {
    Set s;
    for (char c : std::string(" \t\n\r\f\v")) s.set(static_cast<unsigned char>(c));
    return s;
}

class Parser {
public:
    explicit Parser(std::string_view p) : p_(p) {}

    std::unique_ptr<Node> parse() {
        auto n = alternation(0);
        if (i_ < p_.size()) fail("unmatched ')'");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw PatternError(what + " at character " + std::to_string(i_ + 1));
    }
    bool more() const { return i_ < p_.size(); }
    char peek() const { return p_[i_]; }

    std::unique_ptr<Node> alternation(int depth) {
        auto first = concatenation(depth);
        if (!more() || peek() != '|') return first;
        auto n = std::make_unique<Node>();
        n->kind = Node::alt;
        n->kids.push_back(std::move(first));
        while (more() && peek() == '|') {
            ++i_;
            n->kids.push_back(concatenation(depth));
        }
        return n;
    }

    std::unique_ptr<Node> concatenation(int depth) {
        auto n = std::make_unique<Node>();
        n->kind = Node::concat;
        while (more() && peek() != '|' && peek() != ')') n->kids.push_back(quantified(depth));
        return n;
    }

    // A non-negative count of a {n,m}, at most 1000 (ECMAScript has no bound;
    // kMaxProgram bounds the copies anyway).
    int count() {
        if (!more() || peek() < '0' || peek() > '9') fail("expected a count in '{'");
        int v = 0;
        while (more() && peek() >= '0' && peek() <= '9') {
            v = v * 10 + (peek() - '0');
            if (v > 1000) fail("a repeat count above 1000");
            ++i_;
        }
        return v;
    }

    std::unique_ptr<Node> quantified(int depth) {
        auto atom_node = atom(depth);
        while (more()) {
            int mn = 0, mx = -1;
            const char c = peek();
            if (c == '*') {
                ++i_;
            } else if (c == '+') {
                mn = 1, ++i_;
            } else if (c == '?') {
                mx = 1, ++i_;
            } else if (c == '{') {
                ++i_;
                mn = count();
                mx = mn;
                if (more() && peek() == ',') {
                    ++i_;
                    mx = more() && peek() == '}' ? -1 : count();
                }
                if (!more() || peek() != '}') fail("expected '}'");
                ++i_;
                if (mx >= 0 && mx < mn) fail("a repeat {n,m} with m < n");
            } else {
                break;
            }
            if (atom_node->kind == Node::assert_ || atom_node->kind == Node::look) fail("a quantifier after an assertion");
            if (more() && peek() == '?') ++i_;  // lazy: the same texts match
            auto r = std::make_unique<Node>();
            r->kind = Node::repeat;
            r->min = mn, r->max = mx;
            r->kids.push_back(std::move(atom_node));
            atom_node = std::move(r);
        }
        return atom_node;
    }

    std::unique_ptr<Node> leaf(const Set& s) {
        auto n = std::make_unique<Node>();
        n->kind = Node::set;
        n->chars = s;
        return n;
    }
    std::unique_ptr<Node> assertion(Pattern::Op op) {
        auto n = std::make_unique<Node>();
        n->kind = Node::assert_;
        n->assertion = op;
        return n;
    }

    // An escape's class (\d \w \s and their complements) or literal byte.
    Set escape(bool in_class) {
        if (!more()) fail("a '\\' at the end");
        const char c = p_[i_++];
        switch (c) {
            case 'd': return digit_chars();
            case 'D': return ~digit_chars();
            case 'w': return word_chars();
            case 'W': return ~word_chars();
            case 's': return space_chars();
            case 'S': return ~space_chars();
            case 'n': return Set().set('\n');
            case 't': return Set().set('\t');
            case 'r': return Set().set('\r');
            default: break;
        }
        if (c >= '1' && c <= '9') {
            --i_;
            fail("a back-reference (it needs backtracking; not supported)");
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '0') {
            --i_;
            fail(std::string("an unknown escape '\\") + c + "'" + (in_class ? " in a class" : ""));
        }
        return Set().set(static_cast<unsigned char>(c));
    }

    Set char_class() {
        // after '['
        bool negate = false;
        if (more() && peek() == '^') negate = true, ++i_;
        Set s;
        bool first = true;
        while (true) {
            if (!more()) fail("an unclosed '['");
            if (peek() == ']' && !first) break;
            first = false;
            Set item;
            int lo = -1;
            if (peek() == '\\') {
                ++i_;
                item = escape(true);
                if (item.count() == 1)
                    for (int c = 0; c < 256; ++c)
                        if (item[c]) lo = c;
            } else {
                lo = static_cast<unsigned char>(p_[i_++]);
                item.set(lo);
            }
            if (lo >= 0 && i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
                ++i_;
                int hi;
                if (peek() == '\\') {
                    ++i_;
                    const Set e = escape(true);
                    if (e.count() != 1) fail("a range ending in a class");
                    hi = 0;
                    for (int c = 0; c < 256; ++c)
                        if (e[c]) hi = c;
                } else {
                    hi = static_cast<unsigned char>(p_[i_++]);
                }
                if (hi < lo) fail("a range out of order");
                for (int c = lo; c <= hi; ++c) item.set(c);
            }
            s |= item;
        }
        ++i_;  // ']'
        return negate ? ~s : s;
    }

    std::unique_ptr<Node> atom(int depth) {
        const char c = p_[i_];
        switch (c) {
            case '(': {
                if (depth + 1 > Pattern::kMaxNesting)
                    fail("groups nested deeper than " + std::to_string(Pattern::kMaxNesting));
                ++i_;
                auto g = std::make_unique<Node>();
                g->kind = Node::group;
                if (more() && peek() == '?') {
                    const char k = i_ + 1 < p_.size() ? p_[i_ + 1] : '\0';
                    if (k == ':') {
                        i_ += 2;
                    } else if (k == '=' || k == '!') {
                        g->kind = Node::look;
                        g->negated = k == '!';
                        i_ += 2;
                    } else {
                        fail("a lookbehind or named group (not supported: lookaheads (?= ) and (?! ) are)");
                    }
                }
                auto inner = alternation(depth + 1);
                if (!more() || peek() != ')') fail("an unclosed '('");
                ++i_;
                g->kids.push_back(std::move(inner));
                return g;
            }
            case '[': ++i_; return leaf(char_class());
            case '.': ++i_; return leaf(~Set().set('\n').set('\r'));
            case '^': ++i_; return assertion(Pattern::Op::line_start);
            case '$': ++i_; return assertion(Pattern::Op::line_end);
            case '\\':
                ++i_;
                if (more() && peek() == 'b') return ++i_, assertion(Pattern::Op::word_boundary);
                if (more() && peek() == 'B') return ++i_, assertion(Pattern::Op::not_word_boundary);
                return leaf(escape(false));
            case '*':
            case '+':
            case '?':
            case '{': fail(std::string("nothing to repeat before '") + c + "'");
            default: ++i_; return leaf(Set().set(static_cast<unsigned char>(c)));
        }
    }

    std::string_view p_;
    size_t i_ = 0;
};

// Emits a node's program (Thompson's fragments, laid out in sequence).
class Compiler {
public:
    explicit Compiler(std::vector<Pattern::Program>& progs) : progs_(progs) {}

    // Compiles n into a new program, ending in match; returns its index.
    size_t program(const Node& n) {
        const size_t saved = cur_;
        cur_ = progs_.size();
        progs_.emplace_back();
        emit(n);
        add({Pattern::Op::match, 0, 0, {}});
        const size_t made = cur_;
        cur_ = saved;
        return made;
    }

private:
    Pattern::Program& prog() { return progs_[cur_]; }

    void emit(const Node& n) {
        switch (n.kind) {
            case Node::empty: break;
            case Node::set: add({Pattern::Op::set, 0, 0, n.chars}); break;
            case Node::assert_: add({n.assertion, 0, 0, {}}); break;
            case Node::group: emit(*n.kids[0]); break;
            case Node::look: {
                const size_t sub = program(*n.kids[0]);
                add({Pattern::Op::look, static_cast<int>(sub), n.negated ? 1 : 0, {}});
                break;
            }
            case Node::concat:
                for (const auto& k : n.kids) emit(*k);
                break;
            case Node::alt: {
                // split L1, next; L1: a; jump end; next: split L2, ... ; last
                std::vector<size_t> jumps;
                for (size_t k = 0; k + 1 < n.kids.size(); ++k) {
                    const size_t split = add({Pattern::Op::split, 0, 0, {}});
                    prog()[split].x = static_cast<int>(prog().size());
                    emit(*n.kids[k]);
                    jumps.push_back(add({Pattern::Op::jump, 0, 0, {}}));
                    prog()[split].y = static_cast<int>(prog().size());
                }
                emit(*n.kids.back());
                for (size_t j : jumps) prog()[j].x = static_cast<int>(prog().size());
                break;
            }
            case Node::repeat: {
                const Node& a = *n.kids[0];
                for (int k = 0; k < n.min; ++k) emit(a);
                if (n.max < 0) {
                    // L: split body, end; body; jump L
                    const size_t split = add({Pattern::Op::split, 0, 0, {}});
                    prog()[split].x = static_cast<int>(prog().size());
                    emit(a);
                    add({Pattern::Op::jump, static_cast<int>(split), 0, {}});
                    prog()[split].y = static_cast<int>(prog().size());
                } else {
                    // (a(a(a)?)?)? for the optional copies
                    std::vector<size_t> splits;
                    for (int k = n.min; k < n.max; ++k) {
                        splits.push_back(add({Pattern::Op::split, 0, 0, {}}));
                        prog()[splits.back()].x = static_cast<int>(prog().size());
                        emit(a);
                    }
                    for (size_t s : splits) prog()[s].y = static_cast<int>(prog().size());
                }
                break;
            }
        }
    }

    size_t add(Pattern::Inst i) {
        if (++total_ > Pattern::kMaxProgram)
            throw PatternError("more than " + std::to_string(Pattern::kMaxProgram) +
                               " steps once its repeats are written out");
        prog().push_back(i);
        return prog().size() - 1;
    }
    std::vector<Pattern::Program>& progs_;
    size_t cur_ = 0;
    size_t total_ = 0;
};

bool is_word(std::string_view t, size_t i) {
    static const Set w = word_chars();
    return i < t.size() && w[static_cast<unsigned char>(t[i])];
}

}  // namespace

Pattern::Pattern(std::string_view pattern) {
    if (pattern.size() > kMaxLength)
        throw PatternError(std::to_string(pattern.size()) + " characters, more than " + std::to_string(kMaxLength));
    auto tree = Parser(pattern).parse();
    Compiler(progs_).program(*tree);
}

bool Pattern::search(std::string_view text) const {
    std::vector<int8_t> memo(progs_.size() * (text.size() + 1), -1);
    return run(0, text, 0, false, memo);
}

bool Pattern::run(size_t p, std::string_view text, size_t start, bool anchored, std::vector<int8_t>& memo) const {
    // The set of live states at each position, each state once (the "on" marks),
    // so a step costs at most the program's size: O(|program| · |text|) in all,
    // plus each lookahead once per position (memo).
    const Program& prog = progs_[p];
    const int n = static_cast<int>(prog.size());
    std::vector<int> now, next, stack;
    std::vector<size_t> on(n, SIZE_MAX);
    now.reserve(n), next.reserve(n), stack.reserve(n);
    auto look = [&](const Inst& in, size_t i) {
        int8_t& m = memo[static_cast<size_t>(in.x) * (text.size() + 1) + i];
        if (m < 0) m = run(static_cast<size_t>(in.x), text, i, true, memo) ? 1 : 0;
        return (m == 1) != (in.y == 1);
    };
    // Follows splits, jumps and assertions from pc at position i; the states
    // that wait for a byte are added to `to`. True on a match.
    auto closure = [&](int from, size_t i, std::vector<int>& to) {
        stack.push_back(from);
        bool matched = false;
        while (!stack.empty()) {
            const int pc = stack.back();
            stack.pop_back();
            if (on[pc] == i) continue;
            on[pc] = i;
            const Inst& in = prog[pc];
            switch (in.op) {
                case Op::set: to.push_back(pc); break;
                case Op::match: matched = true; break;
                case Op::jump: stack.push_back(in.x); break;
                case Op::split:
                    stack.push_back(in.y);
                    stack.push_back(in.x);
                    break;
                case Op::line_start:
                    if (i == 0) stack.push_back(pc + 1);
                    break;
                case Op::line_end:
                    if (i == text.size()) stack.push_back(pc + 1);
                    break;
                case Op::word_boundary:
                case Op::not_word_boundary: {
                    const bool boundary = (i > 0 && is_word(text, i - 1)) != is_word(text, i);
                    if (boundary == (in.op == Op::word_boundary)) stack.push_back(pc + 1);
                    break;
                }
                case Op::look:
                    if (look(in, i)) stack.push_back(pc + 1);
                    break;
            }
        }
        return matched;
    };
    for (size_t i = start;; ++i) {
        // A search starts a thread at every position; an anchored run at `start` only.
        if ((i == start || !anchored) ? closure(0, i, now) : false) return true;
        if (i == text.size()) return false;
        if (anchored && now.empty()) return false;
        next.clear();
        const unsigned char c = static_cast<unsigned char>(text[i]);
        for (int pc : now)
            if (prog[pc].chars[c] && closure(pc + 1, i + 1, next)) return true;
        std::swap(now, next);
    }
}

}  // namespace conform
