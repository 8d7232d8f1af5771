import math

import pytest
import torch

from autograder.compare import expect_tensor

pytestmark = pytest.mark.part("sdpa")


def test_sdpa_matches_formula(impl):
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
    out, weights = impl.call("scaled_dot_product_attention", q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    expect_tensor(weights, expected_w, what="weights of scaled_dot_product_attention(q (2,5,8), k (2,7,8), v (2,7,3))")
    expect_tensor(out, expected_w @ v, what="out of scaled_dot_product_attention(q (2,5,8), k (2,7,8), v (2,7,3))")
