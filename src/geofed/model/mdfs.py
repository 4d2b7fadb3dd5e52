"""MDFS across sites (seed 000): counting split by speed, staging from the storage site.

compute: every node counts its share of the tuples at its site's measured cost per
tuple, after a fixed per-run part (contrast variables, discretisation); the slowest
node sets the time. The `speed` split gives shares in proportion to cores x site
speed (the federation file), `even` equal shares.

staging: the data set is read at the storage site, sent once to the first node of
every other site over a fresh connection across the link (slow start, then the
link's rate), and shared inside each site (the one-site staging time measured at
that node count).

final reduction: every rank sends its maxima to rank 0 (one message each).
"""

from __future__ import annotations

from geofed.model import Model, Prediction, interpolate, prediction
from geofed.model.network import fresh_stream_s, mpi_message_s
from geofed.records.mdfs import MdfsSplitParams

RESULT_BYTES_PER_VARIABLE = 8


class Mdfs(Model, name="mdfs", measured_unit="s", Params=MdfsSplitParams):
    """multidimensional feature selection (seed 000) with its data at the storage site"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        sites = [n.site for n in nodes]
        tuples = cal.value(sites[0], "mdfs_tuples", "MDFS tuple count")
        weights = [fed.site(s).cores_per_node * fed.site(s).speed for s in sites]
        if params.split == "even":
            weights = [1.0] * len(sites)
        shares = [tuples * w / sum(weights) for w in weights]
        per_node = [cal.value(s, "mdfs_overhead_s", "MDFS per-run time")
                    + share * cal.value(s, "mdfs_tuple_us", "MDFS cost per tuple") / 1e6
                    for s, share in zip(sites, shares)]
        compute = max(per_node)
        result = RESULT_BYTES_PER_VARIABLE * 1000
        reduce_local = reduce_link = 0.0
        for s in sites[1:]:
            t = mpi_message_s(fed, cal, s, sites[0], result)
            local = cal.local_latency_s(s, result)
            reduce_local, reduce_link = reduce_local + local, reduce_link + (t - local)
        staging_local, staging_link, link_bytes = self._staging(fed, cal, sites)
        return prediction(self.name, placement, compute=compute, local_comm=reduce_local + staging_local,
                          link_comm=reduce_link + staging_link, link_bytes=link_bytes)

    @staticmethod
    def _staging(fed, cal, sites: list[str]) -> tuple[float, float, float]:
        storage = fed.storage
        nodes_at = {s: sites.count(s) for s in dict.fromkeys(sites)}
        xs = cal.value(storage, "mdfs_staging_nodes", "MDFS staging inside a site")
        ys = cal.value(storage, "mdfs_staging_s", "MDFS staging inside a site")
        nbytes = cal.value(storage, "mdfs_staging_bytes", "MDFS data set size")
        local = max(interpolate(xs, ys, n, beyond="linear") for n in nodes_at.values())
        link, link_bytes = 0.0, 0.0
        source = storage if storage in nodes_at else sites[0]  # no node there: rank 0 reads the file
        for s in nodes_at:
            if s != source:
                link += fresh_stream_s(fed, cal, source, s, nbytes)
                link_bytes += nbytes
        return local, link, link_bytes


MODELS = (Mdfs(),)
