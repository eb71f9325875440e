"""gpuwise.trace"""
