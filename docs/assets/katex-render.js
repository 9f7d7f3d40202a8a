// Typesets the maths of a page with KaTeX (docs/assets/katex/, served with the site).
// The pages write maths as `$…$` and `$$…$$`; pymdownx.arithmatex (generic mode, mkdocs.yml)
// leaves each formula as the text of a `.arithmatex` element, `\( … \)` inline and `\[ … \]`
// for a display. A formula KaTeX cannot read is shown as its source in a `.katex-error`
// element, which tests/test_docs_site.py catches.
(function () {
  function typeset(root) {
    root.querySelectorAll(".arithmatex").forEach(function (element) {
      var source = element.textContent.trim();
      var display = source.startsWith("\\[");
      if (source.startsWith("\\(") || display) {
        source = source.slice(2, -2);
      }
      katex.render(source, element, { displayMode: display, throwOnError: false });
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { typeset(document); });  // Material's page-loaded signal
  } else {
    document.addEventListener("DOMContentLoaded", function () { typeset(document); });
  }
})();
