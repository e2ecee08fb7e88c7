"""Checks of a machine against reference values computed on another: the GPU smoke check
(:mod:`tools.smoke.gpu`), whose CPU reference file lies beside it."""
