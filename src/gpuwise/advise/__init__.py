"""gpuwise.advise"""
