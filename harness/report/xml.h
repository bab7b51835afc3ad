// harness/report/xml.h — text that is safe inside XML and HTML.
#pragma once

#include <string>
#include <string_view>

namespace conform::report {

// Escapes s for an XML / HTML text node or a quoted attribute value: & < > " '
// as entities; characters XML 1.0 forbids (control characters other than tab,
// newline and carriage return, U+FFFE/U+FFFF) and bytes that are not valid
// UTF-8 become U+FFFD, so the document always parses (case ids and messages
// come from users' files and implementations' exceptions).
std::string xml_escape(std::string_view s);

// Like xml_escape, and newlines / tabs in attributes as character references
// (an attribute value's whitespace is otherwise normalised to spaces).
std::string xml_attr(std::string_view s);

}  // namespace conform::report
