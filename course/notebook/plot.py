# Heads that learn (read-only; not graded). This cell trains YOUR MultiHeadSelfAttention for a few
# seconds on the CPU, on a toy task that needs two kinds of looking, then shows where each head looks.
#
# The task: a sequence is a start token <s> followed by 12 letters, 4 of which repeat an earlier
# letter. At every letter the model answers two questions at once:
#   1. which letter came just before this one?       -> look at the previous token
#   2. where did this same letter occur before?      -> look at its earlier occurrence (<s>: nowhere)
# The model is only letter and position embeddings, your attention and two linear read-outs, with no
# residual path: every answer has to come through attention.
import time

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = list("abcdefghijklmnop")
START = len(VOCAB)                # the id of <s>
SEQ_LEN, REPEATS = 12, 4          # 12 letters, 4 of which repeat an earlier one
D_MODEL, NUM_HEADS = 32, 2        # try NUM_HEADS = 1 or 4 in a copy of this cell
STEPS, BATCH = 300, 64
SEED = 0                          # fixed seeds: the same run every time
TIME_LIMIT = 60                   # seconds; a very slow attention stops early instead of hanging
n = SEQ_LEN + 1                   # positions, <s> included
positions = torch.arange(n)


def earlier_positions(tokens):
    """(B, n) -> (B, n): where each token occurred before (its latest earlier position), 0 if nowhere."""
    same_earlier = (tokens[:, :, None] == tokens[:, None, :]) & (positions < positions[:, None])  # (B, query, key)
    return (same_earlier * positions).amax(-1)


def make_batch(size, generator):
    """Random sequences: <s>, then SEQ_LEN - REPEATS distinct letters and REPEATS of them again, shuffled.
    No letter occurs more than twice, so "the earlier occurrence" is a single position."""
    distinct = torch.rand(size, len(VOCAB), generator=generator).argsort(-1)[:, :SEQ_LEN - REPEATS]
    again = distinct.gather(1, torch.rand(size, SEQ_LEN - REPEATS, generator=generator).argsort(-1)[:, :REPEATS])
    letters = torch.cat([distinct, again], 1).gather(1, torch.rand(size, SEQ_LEN, generator=generator).argsort(-1))
    tokens = torch.cat([torch.full((size, 1), START), letters], 1)
    return tokens, earlier_positions(tokens)


# A query may look at the positions before it but not at itself (a letter always matches itself),
# and always at <s>: the place to look when there is nothing to find. 0 = allowed, -inf = blocked.
MASK = torch.zeros(n, n).masked_fill(~((positions < positions[:, None]) | (positions == 0)), float("-inf"))


class TwoQuestions(nn.Module):
    def __init__(self):
        super().__init__()
        self.letters = nn.Embedding(len(VOCAB) + 1, D_MODEL)         # + 1: <s>
        self.positions = nn.Embedding(n, D_MODEL)                    # learned: where a token stands
        self.attention = MultiHeadSelfAttention(D_MODEL, NUM_HEADS)  # yours
        self.previous = nn.Linear(D_MODEL, len(VOCAB) + 1)           # answer 1: a letter
        self.earlier = nn.Linear(D_MODEL, n)                         # answer 2: a position

    def forward(self, tokens):
        x = self.letters(tokens) + self.positions(positions)         # (B, n, D_MODEL)
        y, weights = self.attention(x, attn_mask=MASK, need_weights=True)
        if weights.shape != (len(tokens), NUM_HEADS, n, n):
            raise ValueError(f"need_weights=True should return weights of shape (B, h, L, L) = "
                             f"{(len(tokens), NUM_HEADS, n, n)}, not {tuple(weights.shape)}")
        return self.previous(y), self.earlier(y), weights


def train(model, generator):
    """Adam on fresh random batches; returns (steps done, seconds)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = time.perf_counter()
    for step in range(1, STEPS + 1):
        tokens, earlier = make_batch(BATCH, generator)
        previous_logits, earlier_logits, _ = model(tokens)
        # <s> asks nothing: at position t >= 1 the answers are tokens[t - 1] and earlier[t].
        loss = (F.cross_entropy(previous_logits[:, 1:].flatten(0, 1), tokens[:, :-1].flatten())
                + F.cross_entropy(earlier_logits[:, 1:].flatten(0, 1), earlier[:, 1:].flatten()))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"the loss is {loss.item()} at step {step}")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if time.perf_counter() - start > TIME_LIMIT:
            print(f"Stopped after {step} of {STEPS} steps ({TIME_LIMIT} s): your attention is slow here.")
            break
    return step, time.perf_counter() - start


threads = torch.get_num_threads()
torch.set_num_threads(1)  # tiny matrices: one thread is fastest, and far faster on a busy machine
try:
    torch.manual_seed(SEED)
    model = TwoQuestions()
    steps, seconds = train(model, torch.Generator().manual_seed(SEED))
except Exception as error:
    raise RuntimeError(f"Training your MultiHeadSelfAttention failed ({type(error).__name__}: {error}). "
                       "Make the tests above pass, then run this cell again.") from error
finally:
    torch.set_num_threads(threads)


def share(weights, key, counted):
    """Per head: the mean weight that the counted queries (B, n) put on their key (B, n), a position."""
    on_key = weights.gather(-1, key[:, None, :, None].expand(-1, weights.size(1), -1, 1))[..., 0]  # (B, h, n)
    return (on_key * counted[:, None]).sum((0, 2)) / counted.sum()


# Measured on 500 sequences the model has not seen.
model.eval()
with torch.no_grad():
    tokens, earlier = make_batch(500, torch.Generator().manual_seed(SEED + 1))
    previous_logits, earlier_logits, weights = model(tokens)
previous_right = (previous_logits[:, 1:].argmax(-1) == tokens[:, :-1]).float().mean()
earlier_right = (earlier_logits[:, 1:].argmax(-1) == earlier[:, 1:]).float().mean()
previous = (positions - 1).clamp(min=0).expand_as(earlier)
# Where the earlier occurrence IS the previous token ("a a", or <s> at t = 1), a weight there says
# nothing about what the head looks for: those queries count for neither share.
telling = (earlier != previous) & (positions >= 1)
previous_share = share(weights, previous, telling)               # (h,)
earlier_share = share(weights, earlier, telling & (earlier > 0))  # (h,): only letters seen before
print(f"Trained {steps} steps in {seconds:.1f} s. On new sequences the model names the previous letter "
      f"{previous_right:.0%} and the earlier occurrence {earlier_right:.0%} of the time.")
for head in range(NUM_HEADS):
    print(f"head {head}: {previous_share[head]:4.0%} of its attention on the previous token, "
          f"{earlier_share[head]:4.0%} on the earlier occurrence of the same letter")

# One example: row = query (the letter asking), column = key (where it looks); each row sums to 1.
example = ["<s>", *"keplanechlak"]
tokens = torch.tensor([[START if t == "<s>" else VOCAB.index(t) for t in example]])
with torch.no_grad():
    weights = model(tokens)[2][0]  # (h, n, n)
seen = earlier_positions(tokens)[0]
rows = [t for t in range(2, n) if seen[t] > 0]
figure, axes = plt.subplots(1, NUM_HEADS, figsize=(4.6 * NUM_HEADS, 4.9), squeeze=False, constrained_layout=True)
for head, ax in enumerate(axes[0]):
    image = ax.imshow(weights[head], vmin=0, vmax=1, cmap="viridis")
    # Squares: the previous token of each query; circles: the earlier occurrence of a repeated letter.
    ax.scatter(range(n - 1), range(1, n), marker="s", s=90, facecolors="none", edgecolors="white",
               label="previous token")
    ax.scatter(seen[rows], rows, marker="o", s=160, facecolors="none", edgecolors="red", linewidths=2,
               label="earlier occurrence")
    ax.set_title(f"head {head}: {previous_share[head]:.0%} previous token,\n"
                 f"{earlier_share[head]:.0%} earlier occurrence")
    ax.set_xticks(range(n), example)
    ax.set_yticks(range(n), example)
    ax.set_xlabel("key (where it looks)")
    ax.set_ylabel("query")
axes[0, 0].legend(loc="upper right", fontsize="small", framealpha=0.9)
figure.colorbar(image, ax=axes, shrink=0.7, label="attention weight")
plt.show()
