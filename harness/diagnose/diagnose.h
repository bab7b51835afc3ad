// harness/diagnose/diagnose.h — naming the bug behind a failure.
//
// Diagnosis: a failing output is re-judged against the reference re-run with
// one convention changed (a ref::Variant: the other RoPE layout, another
// theta, QK-norm moved, kv heads tiled, the mask shifted, ...), with the same
// tolerance model as the gate (baselines = that variant in the dtype, both
// summation orders). Every hypothesis under which the output conforms is
// reported with its bug id — the id of the mutant (impls/mutants/) that has
// exactly that bug — and the error before and after. When none does, that is
// what is reported; nothing is guessed.
//
// Localisation: for a block, the first tap in data-flow order that diverges;
// for decode, the first token, and the implementation's own block() on the
// same tokens; then where in that tensor the error sits (token, head, rotary
// pair) — the patterns that tell layout, theta and head-mapping bugs apart.
#pragma once

#include <string>
#include <vector>

#include "core/case.h"
#include "gen/gen.h"
#include "reference/reference.h"
#include "judge/judge.h"

namespace conform::diagnose {

// One convention changed, standing for one bug.
struct Hypothesis {
    std::string id;       // the bug id (a mutant's name)
    ref::Variant variant;  // the reference with that convention changed
    std::string why;      // what would be wrong, in a sentence
};

// The hypotheses that can explain a failure of this case: those that apply to
// its op and that its config can tell from the faithful computation (no
// "tiled kv heads" when n_kv_heads is 1 or n_heads, no "QK-norm missing" when
// the config has none).
std::vector<Hypothesis> hypotheses(const Case& c);

// The hypotheses of a block with config c that are a change of the config
// alone (RoPE layout, theta, scaling ignored, partial rotary ignored, QK-norm
// missing), each as the config it amounts to: what a check that has only
// the reference's block under a config can try (conform forward
// --expect-logits). The id is the catalogue's, with the changed value.
std::vector<std::pair<std::string, BlockConfig>> config_hypotheses(const BlockConfig& c);

// Whether `observed` conforms to the reference with h's convention changed,
// under the gate's tolerance model.
bool conforms_under(const Case& c, DType dtype, const NamedD& observed, const Hypothesis& h);

// Whether h explains `observed`: it conforms under h, and the faithful
// reference does not (on a case that cannot tell h from the config, h
// explains nothing). What diagnose() reports.
bool explains(const Case& c, DType dtype, const NamedD& observed, const Hypothesis& h);

// Whether `observed`'s error on `tensor` is a lower precision's: it conforms
// to the reference computed in bf16 or f16 below the claimed dtype, and the
// error is that dtype's kind (unlike_rounding: ""). precision_downgrade is
// named only so; the contradiction check on the unshrunk case uses it too.
// of_its_kind false: the output need only conform at the lower precision (a
// case too small to tell its kind of error may still rule it out).
bool explained_by_precision(const Case& c, DType dtype, const NamedD& observed, const std::string& tensor,
                            bool of_its_kind = true);
// "" when the error of obs against ref looks like low's own rounding error
// (size, no correlation with ref, in most rows and columns); else why not.
// head_width, when given, also tests the error per group of that many
// columns (a head) for a logic change's structure.
std::string unlike_rounding(const DTensor& obs, const DTensor& ref, const DTensor& low, int64_t head_width = 0);

// paged_attention: the cache row a NaN in `observed` came from (its payload,
// gen::poison), named relative to the sequence that read it — past its last
// page's length, a page the block table does not give it, another
// sequence's, or no one's (poison.cpp). nullopt: no traced NaN, or another op.
std::optional<HypothesisMatch> poison_trace(const Case& c, const NamedD& observed);
// A broken output contract named as a bug where it is one (poison.cpp): a
// paged row that sees no key left unwritten. nullopt otherwise.
std::optional<HypothesisMatch> name_contract_error(const Case& c, const std::string& error);

// What diagnosis found.
struct Diagnosis {
    std::vector<HypothesisMatch> matches;
    // Facts found without a bug's name: a poisoned row the output read, where
    // the mechanism that row suggests does not reproduce the output.
    std::vector<std::string> findings;
    int tried = 0;
    std::vector<std::string> ids() const;  // the matched bug ids, each once, in order
};

// Tests every hypothesis against `observed` (an implementation's outputs, or a
// fixture's expected values). `failed` is the verdict under the config, whose
// first failing tensor the errors are reported on. When no listed hypothesis
// explains the failure and RoPE is involved, a theta fitted to the output is
// tried last (it has a free parameter, so it would also absorb other angle
// errors: a bf16-rounded angle is exactly some other theta on one token).
// `truth`, when given, is what `failed` was judged against: its float64
// reference and a-priori noise are reused, not computed again.
Diagnosis diagnose(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed,
                   const Truth* truth = nullptr);

// An earlier failure's diagnosis (`earlier`: its matches) checked on another
// failing case: which of those bugs explain this one too — the hypotheses of
// the same ids on this case, else the very conventions that matched there
// (a fitted or fixed wrong theta), and precision_downgrade by the lower
// dtypes' truths. Only those hypotheses are tried, so it costs a few
// reference runs where diagnose() costs the whole catalogue.
Diagnosis recheck(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed,
                  const std::vector<HypothesisMatch>& earlier, const Truth* truth = nullptr);

// Localises a failure (see the header comment). `truth` is what `failed` was
// judged against. impl, when given, is run on the decode case as a block.
Localisation localise(const Case& c, DType dtype, const NamedD& observed, const Truth& truth,
                      const CaseResult& failed, Implementation* impl);

// A failing run: the case, what was observed, the truth it was judged against.
struct Evidence {
    const Case* c = nullptr;
    const NamedD* observed = nullptr;
    const Truth* truth = nullptr;
};

// Diagnoses and localises a failed result in place: r.hypotheses,
// r.hypotheses_tried, r.localisation, and the report's r.diagnosis lines.
// `subject` names what was observed ("the output", "the expected values").
void explain(CaseResult& r, const Evidence& failing, Implementation* impl, const std::string& subject = "the output");

// A later failure of an op and implementation, in a run that diagnoses each
// bug once (--diagnose first): when an earlier failure's bug explains this
// case too (recheck()), or an earlier failure that named nothing failed first
// at the same tensor, r says so (same_as, the matches, one line each) and
// true is returned; false: it may be something new, for explain() to say.
bool explain_as_earlier(CaseResult& r, const Evidence& failing, const std::vector<const CaseResult*>& earlier);

// The second half of explain(), for a diagnosis already made: localises and
// writes r; `notes` open the report's diagnosis lines.
void annotate(CaseResult& r, const Diagnosis& d, const Evidence& failing, Implementation* impl,
              const std::string& subject, const std::vector<std::string>& notes = {});

// A fixture whose expected values disagree with the reference: diagnoses the
// expected values themselves (which convention produced this golden file?)
// into r, the result of the reference-vs-expected check.
void explain_expected(CaseResult& r, const Case& c);

// The property case `index` of the stream failed on impl (`failed`, on
// the evidence given): shrinks it to the smallest case that still fails, and
// returns that case's result, explained (investigate.cpp). When nothing
// smaller fails, the case itself, explained.
//
// Shrinking keeps a case failing, not discriminating: on a small enough case
// two bugs can coincide (RoPE applied twice at T=1, pos=1 is a position shift
// by one; with T=S=2 a missing mask is a mask off by one). So when the
// smallest case names no bug or several, and the case it was shrunk from
// names fewer (but some), the case is shrunk again, keeping only candidates
// that still fail AND still tell those ids from the coinciding ones (only
// the hypotheses in question are tested per candidate, not the whole
// catalogue); that case is reported, with a line saying what the smaller
// ones could not tell apart.
// `reported`, when given, receives the spec of the case reported. Each
// shrink stops at `limits` (candidates, seconds); the result says how far it
// got (shrink_steps, shrink_tried, shrink_seconds, shrink_stopped). Truths
// of the cases looked at are computed once each.
CaseResult shrink_and_explain(Implementation& impl, const gen::Stream& stream, int index, DType dtype,
                              const Evidence& unshrunk, const CaseResult& failed, gen::CaseSpec* reported = nullptr,
                              const gen::ShrinkLimits& limits = {});

}  // namespace conform::diagnose
