#include "core/json_input.h"

#include <vector>

namespace conform {

std::string json_shape_problem(std::string_view text, int max_depth, uint64_t max_values) {
    int depth = 0;
    uint64_t values = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            continue;
        }
        switch (c) {
            case '"': in_string = true; ++values; break;
            case '{':
            case '[':
                if (++depth > max_depth)
                    return "nested deeper than " + std::to_string(max_depth) + " levels (at byte " + std::to_string(i) + ")";
                ++values;
                break;
            case '}':
            case ']': --depth; break;
            case ',': ++values; break;
            default: break;
        }
        if (values > max_values)
            return "more than " + std::to_string(max_values) + " JSON values (at byte " + std::to_string(i) + ")";
    }
    return "";
}

namespace {

using nlohmann::json;

// Appends a scalar's compact form, a string's first `room` characters only.
void scalar(const json& v, size_t room, std::string& out) {
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        // Escaping never shortens, so room + 1 characters are enough to know it is cut.
        out += json(s.substr(0, room + 1)).dump(-1, ' ', true, json::error_handler_t::replace);
    } else {
        out += v.dump(-1, ' ', true, json::error_handler_t::replace);
    }
}

}  // namespace

std::string shown(const json& v, size_t max) {
    std::string out;
    // An explicit stack of (container, next child): the value's depth costs heap, not stack.
    struct Frame {
        const json* v;
        json::const_iterator it;
        bool first;
    };
    std::vector<Frame> stack;
    auto enter = [&](const json& x) {
        if (x.is_structured()) {
            out += x.is_object() ? '{' : '[';
            stack.push_back({&x, x.cbegin(), true});
        } else {
            scalar(x, max > out.size() ? max - out.size() : 0, out);
        }
    };
    enter(v);
    while (!stack.empty() && out.size() <= max) {
        Frame& f = stack.back();
        if (f.it == f.v->cend()) {
            out += f.v->is_object() ? '}' : ']';
            stack.pop_back();
            continue;
        }
        if (!f.first) out += ',';
        f.first = false;
        if (f.v->is_object()) {
            const size_t room = max > out.size() ? max - out.size() : 0;
            scalar(json(f.it.key().substr(0, room + 1)), room, out);
            out += ':';
        }
        const json& child = *f.it;
        ++f.it;
        enter(child);
    }
    if (out.size() > max) out = out.substr(0, max) + "...";
    return out;
}

}  // namespace conform
