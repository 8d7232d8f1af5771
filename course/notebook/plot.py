# The attention weights of each head of your MultiHeadSelfAttention (random weights) for a short
# sentence, without and with the causal mask (read-only; not graded).
import matplotlib.pyplot as plt

tokens = ["the", "cat", "sat", "on", "the", "mat"]
d_model, num_heads = 16, 4
torch.manual_seed(0)
attention = MultiHeadSelfAttention(d_model, num_heads).eval()
x = torch.randn(1, len(tokens), d_model)
with torch.no_grad():
    rows = [("no mask", attention(x, need_weights=True)[1]),
            ("causal mask", attention(x, attn_mask=causal_mask(len(tokens)), need_weights=True)[1])]
figure, axes = plt.subplots(len(rows), num_heads, figsize=(3 * num_heads, 6.5), constrained_layout=True)
for row, (title, weights) in zip(axes, rows):
    for head, ax in enumerate(row):
        image = ax.imshow(weights[0, head], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"head {head}, {title}")
        ax.set_xticks(range(len(tokens)), tokens, rotation=90)
        ax.set_yticks(range(len(tokens)), tokens)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
plt.show()
