// The live dot in the header: green while the page's event stream is open.
(function () {
  function mark(state) {
    var dot = document.getElementById("live");
    if (dot) { dot.dataset.state = state; dot.title = state === "open" ? "live" : "reconnecting"; }
  }
  document.addEventListener("htmx:sseOpen", function () { mark("open"); });
  document.addEventListener("htmx:sseError", function () { mark("lost"); });
  // A page left for another closes its event stream: a browser keeps few connections per
  // site, and pages kept for the back button would hold them all.
  window.addEventListener("pagehide", function () {
    htmx.trigger(document.body, "htmx:beforeCleanupElement");
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { window.location.reload(); }
  });
})();
