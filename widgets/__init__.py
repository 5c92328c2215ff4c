"""Jupyter widgets of the workbench: thin views over prism's events and IR JSON.

They import `prism.trace` and `prism.ir`, never the reverse (DESIGN.md §2). The views themselves
(SGraphView, SearchExplorer, ProofView, TuningMonitor, Workbench) arrive with the workbench issue.
"""
