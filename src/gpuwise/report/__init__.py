"""gpuwise.report"""
