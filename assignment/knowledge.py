"""Knowledge check, for students who work in files rather than in the notebook.

Replace each None with your answer. The grader reads the values you assign (a string,
True/False or a number) without running this file, so write plain values, not expressions.
The same questions are in assignment/mhsa.ipynb: answer here when your code is in mhsa.py,
in the notebook when your code is there (the file graded decides which answers count).
"""

# Q1. What makes attention *self*-attention?
#   "a": the queries, keys and values are all computed from the same sequence
#   "b": every position attends only to itself
#   "c": it uses a single head
#   "d": the attention weights are parameters learned by gradient descent
# Answer with one of "a", "b", "c", "d" (a string).
Q1_ANSWER = None

# Q2. With $h$ heads, multi-head attention projects $Q$, $K$, $V$ into $h$ subspaces of size
#   $d_k$, attends in each one independently, and concatenates the $h$ results into one vector
#   of size $h \cdot d_k = d_{model}$.
# Answer with True or False.
Q2_ANSWER = None

# Q3. With $d_{model} = 64$ and $h = 8$ heads, what is $d_k$?
# Answer with a number.
Q3_ANSWER = None

# Q4. Which formula is scaled dot-product attention?
#   "a": $\mathrm{softmax}(Q K^\top)\, V / \sqrt{d_k}$
#   "b": $\mathrm{softmax}(Q K^\top / \sqrt{d_k})\, V$
#   "c": $\mathrm{softmax}(Q K^\top / d_k)\, V$
#   "d": $\mathrm{softmax}(Q V^\top / \sqrt{d_k})\, K$
# Answer with one of "a", "b", "c", "d" (a string).
Q4_ANSWER = None

# Q5. In *cross*-attention (for example a translation decoder reading the encoder output), where
#   do the queries, keys and values come from?
#   "a": the queries from one sequence, the keys and values from another
#   "b": the keys from one sequence, the queries and values from another
#   "c": all three from the same sequence, with a different mask
#   "d": all three from the encoder output
# Answer with one of "a", "b", "c", "d" (a string).
Q5_ANSWER = None

# Q6. Where is the output projection $W^O$ applied?
#   "a": to each head's queries, before the dot product
#   "b": to the attention scores, before the softmax
#   "c": to the concatenation of all heads' outputs
#   "d": to the input $x$, before the $Q$, $K$, $V$ projections
# Answer with one of "a", "b", "c", "d" (a string).
Q6_ANSWER = None

# Q7. Why are the scores divided by $\sqrt{d_k}$?
#   "a": so that the attention weights of a row sum to 1
#   "b": with unit-variance entries, $q \cdot k$ has variance $d_k$: scaling brings it back to 1, so the softmax does not saturate and its gradients do not vanish
#   "c": to save memory in the $L \times L$ score matrix
#   "d": to normalise the value vectors
# Answer with one of "a", "b", "c", "d" (a string).
Q7_ANSWER = None

# Q8. Without positional encodings, multi-head self-attention knows the order of the tokens:
#   permuting the input rows changes the outputs by more than the same permutation.
# Answer with True or False.
Q8_ANSWER = None

# Q9. `torch.nn.MultiheadAttention` called with `query = key = value = x` computes multi-head
#   self-attention of `x`.
# Answer with True or False.
Q9_ANSWER = None

# Q10. A causal mask in a sequence of length $L$ lets query position $i$ attend to which key
#   positions $j$?
#   "a": $j \le i$
#   "b": $j \ge i$
#   "c": $j = i$ only
#   "d": all $j$, but with smaller weights for $j > i$
# Answer with one of "a", "b", "c", "d" (a string).
Q10_ANSWER = None

# W1 (written answer, 1 point(s), graded by hand, not by the autograder). In two or three
#   sentences: what would go wrong in training if the scores were *not* divided by $\sqrt{d_k}$,
#   and why does it get worse as $d_k$ grows?
# Answer in a sentence or three, as a string.
W1_ANSWER = ""

# W2 (written answer, 1 point(s), graded by hand, not by the autograder). Name one model or task
#   that uses self-attention and one that uses cross-attention, and say in one sentence what
#   each attends to.
# Answer in a sentence or three, as a string.
W2_ANSWER = ""
