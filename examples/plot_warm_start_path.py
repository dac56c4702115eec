"""
A regularisation path with warm starts
======================================

Fit logistic regression on 20,000 real flights for seven values of ``C``, once
with a fresh estimator per value and once refitting one estimator with
``warm_start=True``: each warm fit starts from the last one's coefficients (its
dual values set from them), so it needs fewer rounds, and every fit is still
certified by its duality gap.
"""

import matplotlib.pyplot as plt
import numpy as np

from daskelastic import LogisticRegression
from daskelastic.datasets import load_flights

X, y, names = load_flights(n_rows=20_000)
Cs = np.logspace(-2, 1, 7)

cold_rounds, warm_rounds, coefs = [], [], []
# (liblinear's penalised intercept: on one-hot sparse columns, which are not
# centred, a free intercept takes many more rounds; the user guide's *The intercept*)
warm = LogisticRegression(tol=1e-6, warm_start=True, penalize_intercept=True, random_state=0)
for C in Cs:
    cold = LogisticRegression(C=C, tol=1e-6, penalize_intercept=True, random_state=0).fit(X, y)
    warm.set_params(C=C).fit(X, y)
    assert warm.duality_gap_ <= 1e-6
    cold_rounds.append(cold.n_iter_[0])
    warm_rounds.append(warm.n_iter_[0])
    coefs.append(warm.coef_.ravel().copy())
    print(f"C={C:<7.3g} rounds: cold {cold_rounds[-1]:4d}, warm {warm_rounds[-1]:4d}")
print(f"the whole path: {sum(cold_rounds)} rounds cold, {sum(warm_rounds)} warm")

# the carriers' coefficients along the path
carriers = [i for i, name in enumerate(names) if name.startswith("carrier=")]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
ax1.semilogx(Cs, np.array(coefs)[:, carriers])
ax1.set_xlabel("C")
ax1.set_ylabel("coefficient")
ax1.set_title("carriers along the path")
ax2.semilogx(Cs, cold_rounds, marker="o", label="cold fits")
ax2.semilogx(Cs, warm_rounds, marker="o", label="warm_start=True")
ax2.set_xlabel("C")
ax2.set_ylabel("rounds")
ax2.legend()
fig.tight_layout()
