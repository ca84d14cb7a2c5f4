// The live dot in the header: green while the page's event stream is open.
(function () {
  function mark(state) {
    var dot = document.getElementById("live");
    if (dot) { dot.dataset.state = state; dot.title = state === "open" ? "live" : "reconnecting"; }
  }
  document.addEventListener("htmx:sseOpen", function () { mark("open"); });
  document.addEventListener("htmx:sseError", function () { mark("lost"); });
})();
