"""Large guest BLAS and LAPACK calls, computed in place by the host's BLAS (docs/compute.md).

`routines` names the guest routines the warm image routes to the host (their order gives each
its route id); `host` computes a routed call on the guest's memory in place, after validating
that every byte it reads or writes lies inside that memory, or declines (the guest's own routine
then runs). numpy, SciPy and threadpoolctl (the `blas` extra) are imported on the first routed
call only; without them every call is declined.
"""
