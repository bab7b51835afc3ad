#include "report/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "report/view.h"
#include "report/xml.h"

namespace conform::report::svg {

namespace {

struct Rgb {
    double r, g, b;
};

std::string hex(Rgb c) {
    auto ch = [](double v) { return static_cast<int>(std::lround(std::clamp(v, 0.0, 255.0))); };
    return fmt::format("#{:02x}{:02x}{:02x}", ch(c.r), ch(c.g), ch(c.b));
}

Rgb lerp(Rgb a, Rgb b, double t) {
    return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

// Piecewise-linear through evenly spaced stops.
template <size_t N>
Rgb ramp(const std::array<Rgb, N>& stops, double t) {
    t = std::clamp(t, 0.0, 1.0) * static_cast<double>(N - 1);
    const size_t i = std::min(static_cast<size_t>(t), N - 2);
    return lerp(stops[i], stops[i + 1], t - static_cast<double>(i));
}

constexpr double kCalmDecades = 4;  // 1e-4 .. 1 × allowed
constexpr const char* kNanColour = "#e000e0";

// Quantised, so a row of near-equal errors merges into one rectangle.
double quantise(double t, int levels) {
    return std::round(std::clamp(t, 0.0, 1.0) * levels) / levels;
}

std::string fmt_num(double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<long long>(v));
    return fmt::format("{:.3g}", v);
}

// A few round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int want) {
    std::vector<double> t;
    if (!(hi > lo)) return {lo};
    const double raw = (hi - lo) / want;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    step = std::max(step, 1.0);  // positions, dims and heads are integers
    for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9; v += step) t.push_back(v);
    return t;
}

}  // namespace

std::string colour(double err, double allowed, double hot_decades) {
    if (std::isnan(err)) return kNanColour;
    if (err <= 0) return "#ffffff";
    const double ratio = allowed > 0 ? err / allowed : INFINITY;
    const double d = std::isinf(ratio) ? hot_decades : std::log10(ratio);
    if (d <= 0) {
        static const std::array<Rgb, 2> calm = {Rgb{243, 245, 249}, Rgb{150, 178, 214}};
        return hex(ramp(calm, quantise(1 + d / kCalmDecades, 8)));
    }
    static const std::array<Rgb, 5> hot = {Rgb{255, 228, 120}, Rgb{255, 160, 64}, Rgb{235, 60, 30}, Rgb{160, 0, 40},
                                           Rgb{50, 0, 20}};
    return hex(ramp(hot, quantise(d / hot_decades, 24)));
}

double hot_decades(const nlohmann::json& m) {
    const double allowed = number(m, "allowed", 0.0), worst = number(m, "max_err", NAN);
    if (!(allowed > 0) || !(worst > allowed)) return 1;
    return std::clamp(std::ceil(std::log10(worst / allowed)), 1.0, 16.0);
}

std::string legend(double hot_decades) {
    const int w = 22, x0 = 84, h = 14;
    const int hot = static_cast<int>(hot_decades), step = (hot + 9) / 10;
    const int cells = 1 + 5 + (hot + step - 1) / step + 2;
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"legend\" width=\"{}\" height=\"46\" "
        "role=\"img\"><title>colour scale: error relative to the allowed bound</title>"
        "<text x=\"0\" y=\"18\" class=\"ax\">|err| / allowed</text>",
        x0 + cells * w + 40);
    // 0, then 1e-4 .. 1 (calm), then the decades above the bound, then NaN.
    int k = 0;
    auto cell = [&](const std::string& fill, const std::string& label) {
        const int x = x0 + k * w;
        s += fmt::format(
            "<rect x=\"{}\" y=\"6\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#999\" stroke-width=\"0.5\"/>", x,
            w, h, fill);
        if (!label.empty())
            s += fmt::format("<text x=\"{}\" y=\"36\" text-anchor=\"middle\" class=\"tick\">{}</text>", x + w / 2,
                             xml_escape(label));
        ++k;
    };
    cell("#ffffff", "0");
    for (int d = -4; d <= 0; ++d)
        cell(colour(std::pow(10.0, d), 1.0, hot_decades), d == 0 ? "1" : d == -4 ? "1e-4" : "");
    const int labelled = std::max(1, (hot / step + 3) / 4);  // about four labels above the bound
    for (int d = step;; d += step) {
        const int e = std::min(d, hot);
        cell(colour(std::pow(10.0, e), 1.0, hot_decades),
             e == hot || ((d / step) % labelled == 0 && hot - e >= 2 * step) ? fmt::format("1e{}", e) : "");
        if (e == hot) break;
    }
    k++;  // a gap before NaN
    cell(kNanColour, "NaN/Inf");
    // The bound, between "calm" and "hot".
    const int xb = x0 + 6 * w;
    s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"2\" y2=\"24\" stroke=\"#000\" stroke-width=\"1.5\"/>", xb);
    s += "</svg>";
    return s;
}

std::string heatmap(const nlohmann::json& m) {
    const nlohmann::json g = m.value("grid", nlohmann::json::object());
    const int64_t gr = integer(g, "rows"), gc = integer(g, "cols");
    const auto values = g.find("values");
    if (gr <= 0 || gc <= 0 || values == g.end() || !values->is_array() || static_cast<int64_t>(values->size()) != gr)
        return "<p class=\"note\">(no error map in the report for this case)</p>";
    const double allowed = number(m, "allowed", 0.0);
    const bool has_heads = flag(m, "has_heads");
    const int64_t heads = std::max<int64_t>(1, integer(m, "heads", 1)), head_dim = integer(m, "head_dim", gc);
    const int64_t head_pool = std::max<int64_t>(1, integer(g, "head_pool", 1));
    const int64_t dim_pool = std::max<int64_t>(1, integer(g, "dim_pool", 1));
    const int64_t dim_cells = std::max<int64_t>(1, integer(g, "dim_cells", gc));
    const int64_t row_pool = std::max<int64_t>(1, integer(g, "row_pool", 1));
    std::vector<int64_t> pos;
    if (auto p = g.find("row_positions"); p != g.end() && p->is_array())
        for (const auto& v : *p) pos.push_back(v.is_number() ? v.get<int64_t>() : 0);
    while (static_cast<int64_t>(pos.size()) < gr) pos.push_back(static_cast<int64_t>(pos.size()) * row_pool);

    const int64_t cw = std::clamp<int64_t>(880 / gc, 2, 24), ch = std::clamp<int64_t>(320 / gr, 3, 20);
    const int64_t ml = 78, mt = has_heads ? 34 : 12, mb = 44, mr = 12;
    const int64_t width = ml + gc * cw + mr, height = mt + gr * ch + mb;
    const bool titles = gr * gc <= 4096;  // hover text per cell, while the page stays small

    const double hot = hot_decades(m);
    std::map<std::string, std::string> runs;  // colour -> path of its cells: one element per colour keeps pages small
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"map\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "role=\"img\"><title>{}</title><g shape-rendering=\"crispEdges\">",
        width, height, width, height,
        xml_escape(fmt::format("|impl - ref| on {}: {} tokens (position, down) x {} ({} across)", text(m, "tensor"),
                               integer(m, "rows"),
                               has_heads ? fmt::format("{} heads x {} dims", heads, head_dim)
                                         : fmt::format("{} columns", integer(m, "cols")),
                               has_heads ? "head, dim" : "column")));
    for (int64_t i = 0; i < gr; ++i) {
        const nlohmann::json& row = (*values)[static_cast<size_t>(i)];
        auto at = [&](int64_t j) {
            if (!row.is_array() || j >= static_cast<int64_t>(row.size())) return 0.0;
            const auto& v = row[static_cast<size_t>(j)];
            return v.is_null() ? NAN : number(v, 0.0);
        };
        for (int64_t j = 0; j < gc;) {
            const double e = at(j);
            const std::string fill = colour(e, allowed, hot);
            int64_t k = j + 1;
            if (!titles) {
                while (k < gc && colour(at(k), allowed, hot) == fill) ++k;
                runs[fill] +=
                    fmt::format("M{} {}h{}v{}h-{}z", ml + j * cw, mt + i * ch, (k - j) * cw, ch, (k - j) * cw);
                j = k;
                continue;
            }
            s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"", ml + j * cw, mt + i * ch,
                             (k - j) * cw, ch, fill);
            {
                const int64_t hg = j / dim_cells, dg = j % dim_cells;
                std::string where = fmt::format("position {}", pos[static_cast<size_t>(i)]);
                if (has_heads)
                    where += head_pool > 1 ? fmt::format(", heads {}-{}", hg * head_pool, (hg + 1) * head_pool - 1)
                                           : fmt::format(", head {}", hg);
                where += dim_pool > 1 ? fmt::format(", {} {}-{}", has_heads ? "dims" : "cols", dg * dim_pool,
                                                    std::min(head_dim, (dg + 1) * dim_pool) - 1)
                                      : fmt::format(", {} {}", has_heads ? "dim" : "col", dg);
                s += fmt::format("><title>{}: err {} ({}x allowed)</title></rect>", xml_escape(where), sci(e),
                                 allowed > 0 ? fmt::format("{:.3g}", e / allowed) : "inf");
            }
            j = k;
        }
    }
    for (const auto& [fill, d] : runs) s += fmt::format("<path fill=\"{}\" d=\"{}\"/>", fill, d);
    s += "</g>";
    // Frame and head boundaries.
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>", ml, mt,
                     gc * cw, gr * ch);
    const int64_t groups = gc / dim_cells;
    if (has_heads && groups > 1) {
        const double sw = groups > 64 ? 0.4 : 1.0;
        for (int64_t h = 1; h < groups; ++h)
            s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#222\" stroke-width=\"{3}\"/>",
                             ml + h * dim_cells * cw, mt - 4, mt + gr * ch, sw);
    }
    // Head labels on top, as many as fit.
    if (has_heads) {
        const int64_t group_px = dim_cells * cw;
        const int64_t every = std::max<int64_t>(1, (head_pool > 1 ? 40 : 22) / std::max<int64_t>(1, group_px));
        for (int64_t h = 0; h < groups; h += every) {
            const std::string label =
                head_pool > 1 ? fmt::format("{}-{}", h * head_pool, (h + 1) * head_pool - 1) : fmt::format("{}", h);
            s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{}</text>",
                             ml + h * group_px + group_px / 2, mt - 7, label);
        }
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"ax\">head</text>", ml - 6, mt - 7);
    }
    // Positions down the left, at row centres, never closer than a line apart;
    // the last row too when there is room.
    const int64_t every = std::max<int64_t>({1, (gr + 7) / 8, (12 + ch - 1) / ch});
    int64_t last = 0;
    for (int64_t i = 0; i < gr; i += every) {
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>", ml - 4,
                         mt + i * ch + ch / 2 + 4, pos[static_cast<size_t>(i)]);
        last = i;
    }
    if (last != gr - 1 && (gr - 1 - last) * ch >= 12)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>", ml - 4,
                         mt + (gr - 1) * ch + ch / 2 + 4, pos.back());
    s += fmt::format(
        "<text transform=\"translate(14,{}) rotate(-90)\" text-anchor=\"middle\" class=\"ax\">"
        "position (token){}</text>",
        mt + gr * ch / 2, row_pool > 1 ? fmt::format(", {} per row", row_pool) : "");
    // Dims of the first head (or columns) along the bottom.
    const int64_t yb = mt + gr * ch + 14;
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"start\" class=\"tick\">0</text>", ml, yb);
    if (dim_cells > 1)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>", ml + dim_cells * cw,
                         yb, head_dim - 1);
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" class=\"ax\">{}</text>", ml, yb + 18,
        xml_escape(has_heads ? fmt::format("dim within each head (0..{}{}), heads left to right", head_dim - 1,
                                           dim_pool > 1 ? fmt::format(", {} dims per cell", dim_pool) : "")
                             : fmt::format("column (0..{}{})", head_dim - 1,
                                           dim_pool > 1 ? fmt::format(", {} per cell", dim_pool) : "")));
    s += "</svg>";
    return s;
}

std::string line_plot(const Plot& p) {
    const double W = 440, H = 230, ml = 62, mr = 26, mt = 26, mb = 44;
    const double pw = W - ml - mr, ph = H - mt - mb;
    const size_t n = std::min(p.x.size(), p.y.size());
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(p.y[i]) && p.y[i] > 0) lo = std::min(lo, p.y[i]), hi = std::max(hi, p.y[i]);
    if (p.allowed > 0 && std::isfinite(p.allowed)) lo = std::min(lo, p.allowed), hi = std::max(hi, p.allowed);
    if (!std::isfinite(lo)) lo = 1e-8, hi = 1;
    double dlo = std::floor(std::log10(lo)), dhi = std::ceil(std::log10(hi));
    if (dhi <= dlo) dhi = dlo + 1;
    dlo = std::max(dlo, dhi - 16);  // a 1e-40 next to a 1 would flatten everything else
    double xlo = INFINITY, xhi = -INFINITY;
    for (size_t i = 0; i < n; ++i) xlo = std::min(xlo, p.x[i]), xhi = std::max(xhi, p.x[i]);
    if (!std::isfinite(xlo)) xlo = 0, xhi = 1;
    if (p.bars) xlo -= 0.5, xhi += 0.5;
    if (xhi <= xlo) xlo -= 1, xhi += 1;
    auto X = [&](double x) { return ml + (x - xlo) / (xhi - xlo) * pw; };
    auto Y = [&](double y) {
        const double d = y > 0 ? std::clamp(std::log10(y), dlo, dhi) : dlo;
        return mt + (dhi - d) / (dhi - dlo) * ph;
    };
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" role=\"img\"><title>{}</title>",
        W, H, W, H, xml_escape(p.title));
    s += fmt::format("<text x=\"{}\" y=\"15\" class=\"ax\" font-weight=\"bold\">{}</text>", ml, xml_escape(p.title));
    // Decades.
    const int step = static_cast<int>(std::ceil((dhi - dlo) / 6));
    for (double d = dlo; d <= dhi; d += step) {
        const double y = mt + (dhi - d) / (dhi - dlo) * ph;
        s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>", ml, ml + pw, y,
                         y);
        s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" class=\"tick\">1e{}</text>", ml - 4, y + 4,
                         static_cast<int>(d));
    }
    for (double t : ticks(p.bars ? xlo + 0.5 : xlo, p.bars ? xhi - 0.5 : xhi, 5)) {
        s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#888\"/>", X(t), mt + ph,
                         mt + ph + 4);
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{}</text>", X(t),
                         mt + ph + 16, fmt_num(t));
    }
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#666\"/>", ml, mt, pw,
                     ph);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"ax\">{}</text>", ml + pw / 2, H - 8,
                     xml_escape(p.xlabel));
    s += fmt::format(
        "<text transform=\"translate(13,{}) rotate(-90)\" text-anchor=\"middle\" class=\"ax\">"
        "max |impl - ref|</text>",
        mt + ph / 2);
    // The data: bars for categories, else a line broken at NaN.
    const double barw = std::max(1.0, 0.7 * pw / std::max<double>(1.0, xhi - xlo));
    std::string line;
    auto flush = [&] {
        if (line.find(' ') != std::string::npos)
            s += "<polyline fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\" points=\"" + line + "\"/>";
        line.clear();
    };
    for (size_t i = 0; i < n; ++i) {
        if (std::isnan(p.y[i])) {
            flush();
            s += fmt::format("<path d=\"M{0:.1f},{1} l-4,-7 h8 z\" fill=\"{2}\"><title>NaN/Inf at {3}</title></path>",
                             X(p.x[i]), mt + 8, kNanColour, fmt_num(p.x[i]));
            continue;
        }
        const std::string fill = colour(p.y[i], p.allowed, p.hot_decades);
        if (p.bars) {
            s += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
                "stroke=\"#555\" stroke-width=\"0.5\"><title>{}: {}</title></rect>",
                X(p.x[i]) - barw / 2, Y(p.y[i]), barw, mt + ph - Y(p.y[i]), fill, fmt_num(p.x[i]), sci(p.y[i]));
            continue;
        }
        line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(p.x[i]), Y(p.y[i]));
        if (n <= 64)
            s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" stroke=\"#1f5fa8\"/>",
                             X(p.x[i]), Y(p.y[i]), fill);
    }
    flush();
    if (p.allowed > 0 && std::isfinite(p.allowed)) {
        const double y = Y(p.allowed);
        s += fmt::format(
            "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" stroke-dasharray=\"5,3\"/>", ml,
            ml + pw, y, y);
        s += fmt::format(
            "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" class=\"tick\" fill=\"#c00\">allowed {}</text>",
            ml + pw - 3, y - 3, sci(p.allowed));
    }
    s += "</svg>";
    return s;
}

}  // namespace conform::report::svg
