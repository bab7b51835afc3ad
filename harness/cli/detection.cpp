// conform detection-floor: the smallest relative error the tolerance model
// catches in one element, per op, dtype and class of row (harness/run/floor.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "run/floor.h"

namespace conform::cli {

Command add_detection_floor(CLI::App& app) {
    struct Opts {
        std::string ops, dtypes = "f32,bf16";
        run::FloorOptions f;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand(
        "detection-floor",
        "the smallest relative error in one element of a correct output that the tolerance model catches, per op "
        "and dtype, in rows near position 0 and in rows past 16384 of the same cases");
    sub->add_option("--op", o->ops, "ops, comma-separated (default all)");
    sub->add_option("--dtype", o->dtypes, "dtypes, comma-separated (default f32,bf16)");
    sub->add_option("--cases", o->f.cases, "cases per op (default 20)")->check(positive());
    sub->add_option("--elements", o->f.elements, "elements planted per case and class of row (default 8)")
        ->check(positive());
    sub->add_option("--far", o->f.far, "the large position every case also holds (default 32767)")
        ->check(positive());
    sub->add_option("--seed", o->f.seed, "seed of the cases (default 1)");
    return {sub, [o] {
                for (const auto& n : split_list(o->ops)) {
                    const auto op = parse_op(n);
                    if (!op) throw InputError("--op: unknown op '" + n + "' (ops: " + op_names() + ")");
                    o->f.ops.push_back(*op);
                }
                o->f.dtypes.clear();
                for (const auto& n : split_list(o->dtypes)) {
                    const auto d = parse_dtype(n);
                    if (!d) throw InputError("--dtype: unknown dtype '" + n + "' (f32, bf16, f16)");
                    o->f.dtypes.push_back(*d);
                }
                const auto rows = run::measure_floor(o->f);
                std::cout << fmt::format("detection floor: ε planted as ε·|ref_i| into one element of `out`; every case "
                                         "also holds position {}; {} cases per op, seed {}\n",
                                         o->f.far, o->f.cases, o->f.seed);
                std::cout << fmt::format("{:<10} {:<5} {:<13} {:>7} {:>10} {:>10} {:>10}\n", "op", "dtype", "rows",
                                         "planted", "median ε", "p90 ε", "worst ε");
                for (const auto& r : rows)
                    std::cout << fmt::format("{:<10} {:<5} {:<13} {:>7} {:>10.2e} {:>10.2e} {:>10.2e}\n",
                                             to_string(r.op), to_string(r.dtype), r.rows, r.planted, r.median, r.p90,
                                             r.worst);
                return int(kConform);
            }};
}

}  // namespace conform::cli
