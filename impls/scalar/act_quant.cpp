// The scalar implementation as a llama.cpp CPU kernel feeds its weight
// products: each activation row through Q8_0 (or Q8_K) and back before
// y = x @ W (ggml quantises src1 to the weight type's vec_dot_type, then
// dots int8 blocks; with float weights that is the dequantised row times W).
// It declares so (activation_quant), so the judge's baselines quantise the
// same way: an honest quantised kernel, for the margins it earns
// (BENCHMARKS.md, "Activations quantised as declared") and as the example
// of a declaration. The ops without weight products are declined: there it
// would be scalar itself.
#include <vector>

#include "conform/dtype.h"
#include "conform/op_info.h"
#include "scalar/scalar.h"

namespace conform::scalar {

namespace {

class ActQuantImpl : public ScalarImpl {
   public:
    ActQuantImpl(std::string name, ActQuant q) : ScalarImpl(std::move(name)), q_(q) {}

    Support supports(Op op, const BlockConfig& c) const override {
        if (!has_weight_products(op))
            return Support::no(name() + " quantises the activations of weight products; " + to_string(op) +
                               " has none (run scalar)");
        return ScalarImpl::supports(op, c);
    }
    ActQuant activation_quant(Op op) const override { return has_weight_products(op) ? q_ : ActQuant::none; }

   protected:
    void product(View x, View w, MutView out) override { matmul_act_quant(x, w, out, q_); }

   private:
    ActQuant q_;
};

}  // namespace

// x_q = dequantize(quantize_row_<q>(x)) row by row; out = x_q @ w
void matmul_act_quant(View x, View w, MutView out, ActQuant q) {
    std::vector<float> xq(static_cast<size_t>(x.size()));
    for (int64_t r = 0; r < x.rows; ++r) act_quant_row(x.row(r), xq.data() + r * x.cols, x.cols, q);
    matmul(View{xq.data(), x.rows, x.cols}, w, out);
}

std::unique_ptr<Implementation> make_scalar_act_quant(const ImplOptions& options, ActQuant q) {
    if (options.dtype != DType::f32)
        throw ImplError(std::string("scalar-") + to_string(q) + " runs float32 only, asked for " +
                        to_string(options.dtype));
    return std::make_unique<ActQuantImpl>(std::string("scalar-") + to_string(q), q);
}

}  // namespace conform::scalar
