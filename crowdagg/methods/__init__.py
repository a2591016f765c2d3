"""The methods: the registry of declarations, the services every method uses, and the methods by family.

* :mod:`.registry` -- the declarations, found in each family's
  ``__init__.py`` (names, kinds, parameters), ``REGISTRY`` and
  ``get_method``; standard library only, so listing and help import no
  method code;
* :mod:`.base` -- the base classes; the services they give: :mod:`.loop`
  (stop rules, restarts), :mod:`.starts` (start strategies),
  :mod:`.blocks` (votes, ties, one-coin workers, the gold clamp);
  :mod:`.result` -- the one result type; :mod:`.model_file` -- the
  envelope of saved worker models;
* :mod:`.api` -- :func:`aggregate`;
* families: :mod:`.votes` (mv, wmv, wawa), :mod:`.em` (ds, onecoin).

The registry's names (``Param``, ``Method``, ``METHODS``, ``get``, ...) are
handed on here as the former ``crowdagg.methods`` module had them, and the
former ``crowdagg.aggregators`` package's names (``aggregate``, ``REGISTRY``,
the method classes) too, imported on first use.
"""

from ..core.lazy import exports

__getattr__ = exports(__name__, {
    "aggregate": f"{__name__}.api", "get_method": f"{__name__}.registry", "REGISTRY": f"{__name__}.registry",
    "Aggregator": f"{__name__}.base", "AggregationResult": f"{__name__}.result",
    "MajorityVote": f"{__name__}.votes.mv", "WeightedMajorityVote": f"{__name__}.votes.wmv",
    "Wawa": f"{__name__}.votes.wawa", "DawidSkene": f"{__name__}.em.ds", "OneCoinDawidSkene": f"{__name__}.em.onecoin",
}, fallback=f"{__name__}.registry")
