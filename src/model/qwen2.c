/* qwen2: the llama forward pass with Q/K/V biases and NeoX-style RoPE. */
#include "model/model.h"

static const plm_arch arch_qwen2 = {"qwen2", PLM_ROPE_NEOX, true};

const plm_arch *plm_arch_qwen2(void) { return &arch_qwen2; }
