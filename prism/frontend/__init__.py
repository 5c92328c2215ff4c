"""Ways into the IR: the builder API, torch.fx tracing (`@prism.workload`), Mirage import."""

from prism.frontend.builder import Block, Graph, Tensor

__all__ = ["Block", "Graph", "Tensor"]
