"""gpuwise.guard"""
