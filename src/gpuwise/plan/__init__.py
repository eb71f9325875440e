"""gpuwise.plan"""
