#include "report/xml.h"

#include <cstdint>

namespace conform::report {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i] and its code point; 0 when invalid.
size_t utf8_at(std::string_view s, size_t i, uint32_t* cp) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0)
        n = 2, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, v = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return 0;
        v = (v << 6) | (b(i + k) & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if (v < min || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) return 0;
    *cp = v;
    return n;
}

bool xml_char(uint32_t cp) {
    if (cp < 0x20) return cp == 0x9 || cp == 0xA || cp == 0xD;
    return cp != 0xFFFE && cp != 0xFFFF;
}

std::string escape(std::string_view s, bool attr) {
    std::string out;
    out.reserve(s.size() + s.size() / 8);
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t n = utf8_at(s, i, &cp);
        if (n == 0) {
            out += kReplacement;
            ++i;
            continue;
        }
        if (!xml_char(cp)) {
            out += kReplacement;
        } else {
            switch (cp) {
                case '&':
                    out += "&amp;";
                    break;
                case '<':
                    out += "&lt;";
                    break;
                case '>':
                    out += "&gt;";
                    break;
                case '"':
                    out += "&quot;";
                    break;
                case '\'':
                    out += "&#39;";
                    break;
                case '\n':
                    out += attr ? "&#10;" : "\n";
                    break;
                case '\r':
                    out += "&#13;";
                    break;  // a raw CR would be read back as LF
                case '\t':
                    out += attr ? "&#9;" : "\t";
                    break;
                default:
                    out.append(s.substr(i, n));
            }
        }
        i += n;
    }
    return out;
}

}  // namespace

std::string xml_escape(std::string_view s) {
    return escape(s, false);
}
std::string xml_attr(std::string_view s) {
    return escape(s, true);
}

}  // namespace conform::report
