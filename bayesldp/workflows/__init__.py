"""The application built on the library: what the ``bayesldp`` command runs.

* :mod:`~bayesldp.workflows.cli` -- the ``bayesldp`` command line;
* :mod:`~bayesldp.workflows.spec` -- the one TOML loader, one schema per spec kind;
* :mod:`~bayesldp.workflows.study` and :mod:`~bayesldp.workflows.study_report` -- simulation
  studies over mechanisms and estimators, and their report (markdown, CSV, figures);
* :mod:`~bayesldp.workflows.survey` -- one AdOBEst-LDP survey simulation with live progress;
* :mod:`~bayesldp.workflows.grid` -- the AdOBEst-LDP experiment grid (Aydın and Yıldırım, ACM TKDD
  2025);
* :mod:`~bayesldp.workflows.report_files` -- reading collected reports from CSV or Parquet;
* :mod:`~bayesldp.workflows.recommend` -- ``bayesldp recommend``: mechanisms ranked by the
  expected error of an estimator;
* :mod:`~bayesldp.workflows.tables` -- what commands print: a table, CSV rows or JSON.

Library code (``mechanisms``, ``estimators``, ``bayes``, ``adaptive``) never imports this package.
"""
