"""gpuwise.monitor"""
