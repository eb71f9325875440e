"""gpuwise.runtime"""
