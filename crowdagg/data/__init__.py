"""The data model: answers as flat code arrays (:mod:`.annotations`) and the names behind the codes (:mod:`.vocab`).

``crowdagg.data.AnnotationSet`` and every other name of the former
``crowdagg.data`` module are handed on from :mod:`.annotations`.
"""

from ..core.lazy import exports

__getattr__ = exports(__name__, {}, fallback=f"{__name__}.annotations")
