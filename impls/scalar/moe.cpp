// moe — a mixture-of-experts FFN: the router (moe_route.cpp) writes each
// token's weights into route, the experts (moe_experts.cpp) read them.
#include "scalar.h"

namespace conform::scalar {

void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route, const MoeRules& rules) {
    moe_route(x, w, c, route, rules);
    moe_experts(x, View{route.data, route.rows, route.cols}, w, c, out, rules);
}

}  // namespace conform::scalar
