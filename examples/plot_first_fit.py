"""
A first fit, and the duality gap as a certificate
=================================================

Fit a logistic regression on 20,000 real flights (will a flight arrive more than
15 minutes late?) and plot how the duality gap — a certified bound on how far
the objective is from its optimum — falls round after round.
"""

import matplotlib.pyplot as plt

from daskelastic import LogisticRegression
from daskelastic.datasets import load_flights

X, y, names = load_flights(n_rows=20_000)
# (liblinear's penalised intercept: on one-hot sparse columns, which are not
# centred, a free intercept takes many more rounds; the user guide's *The intercept*)
clf = LogisticRegression(C=0.1, tol=1e-6, penalize_intercept=True).fit(X, y)
print(f"{clf.n_iter_[0]} rounds, certified relative gap {clf.duality_gap_:.1e}")
print(f"training accuracy {clf.score(X, y):.3f}")

rounds = [h["round"] for h in clf.history_]
gaps = [h["duality_gap"] for h in clf.history_]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(rounds, gaps, marker="o")
ax.set_xlabel("round")
ax.set_ylabel("relative duality gap")
ax.set_title("LogisticRegression on NYC flights")
fig.tight_layout()
