"""What every layer uses: memory limits, argument checks, the thread policy, timing, signals.

Standard library and numpy only; nothing here imports another part of
crowdagg but :mod:`crowdagg.errors`.
"""
