"""gpuwise.memory"""
