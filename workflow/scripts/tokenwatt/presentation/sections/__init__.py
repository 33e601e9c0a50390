"""The report's sections, one module each, in the order ``presentation.report`` gives them: each has
``render(inputs: ReportInputs) -> Markup`` and fills its template (``templates/sections/<name>.html.j2``). An
analysis product's section is the module its Product names (``Product.section``), found by that name."""
