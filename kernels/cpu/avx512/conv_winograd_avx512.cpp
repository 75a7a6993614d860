// The Winograd transforms (conv_winograd_transform.h) on 16-lane vectors: this file is compiled for
// AVX-512, so one zmm carries the 16 grid tiles of a B panel where the AVX2 path takes two ymm.
#include "../conv_winograd_transform.h"

namespace dml_cpu::conv::wino {
namespace {

typedef float v16 __attribute__((vector_size(64)));
static_assert(sizeof(v16) / sizeof(float) == kLanes, "one vector per 16-tile panel");

}  // namespace

const Transforms kAvx512Transforms = {input_transform<2, v16>, input_transform<4, v16>, output_transform<2, v16>,
                                      output_transform<4, v16>};

}  // namespace dml_cpu::conv::wino
