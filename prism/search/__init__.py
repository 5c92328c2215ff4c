"""Level-1 symbolic search: generation, pruning rules, map instantiation, checkpoints.

    search(target, SearchConfig(...))      → SearchResult (families, pruned per rule, candidates)
    audit(target, rule, SearchConfig(...)) → AuditReport (what the rule pruned, re-verified)
"""

from prism.search.audit import AuditReport, audit
from prism.search.config import RULE_NAMES, SearchConfig, SearchConfigError
from prism.search.driver import Candidate, SearchResult, UnsupportedTargetError, search
from prism.search.hardware import HardwareVerdict, check_hardware, hardware_constraints

__all__ = ["RULE_NAMES", "AuditReport", "Candidate", "HardwareVerdict", "SearchConfig",
           "SearchConfigError", "SearchResult", "UnsupportedTargetError", "audit",
           "check_hardware", "hardware_constraints", "search"]
