"""
A free intercept
================

Fit logistic regression on 20,000 rows of the real Fertility table (AER) for
five values of ``C``, with the default free intercept and with
``penalize_intercept=True`` (liblinear's problem), and compare both intercepts
with scikit-learn's lbfgs solver, which leaves the intercept free.  The free one
is scikit-learn's, and its duality gap still certifies the fit; the smaller
``C``, the more the penalty shrinks the penalised intercept toward 0.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression as SklearnLogisticRegression

from daskelastic import LogisticRegression
from daskelastic.datasets import load_fertility

X, y, names = load_fertility()
X, y = X[:20_000], y[:20_000]
Cs = np.logspace(-4, 0, 5)

penalised, free, sklearn = [], [], []
for C in Cs:
    pen = LogisticRegression(C=C, tol=1e-6, penalize_intercept=True, random_state=0).fit(X, y)
    fr = LogisticRegression(C=C, tol=1e-6, random_state=0).fit(X, y)
    sk = SklearnLogisticRegression(C=C, tol=1e-10, max_iter=10_000).fit(X, y)
    assert fr.duality_gap_ <= 1e-6
    penalised.append(pen.intercept_[0])
    free.append(fr.intercept_[0])
    sklearn.append(sk.intercept_[0])
    print(f"C={C:<7.3g} intercept: penalised {penalised[-1]:+.5f} ({pen.n_iter_[0]} rounds), "
          f"free {free[-1]:+.5f} ({fr.n_iter_[0]} rounds), scikit-learn {sklearn[-1]:+.5f}")

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(Cs, sklearn, color="black", lw=4, alpha=0.3, label="scikit-learn lbfgs")
ax.semilogx(Cs, free, marker="o", label="free (default)")
ax.semilogx(Cs, penalised, marker="s", label="penalize_intercept=True")
ax.set_xlabel("C")
ax.set_ylabel("intercept")
ax.legend()
fig.tight_layout()
