// The catalog's live updates, run by catalog.js as a dedicated worker so
// that the page itself holds no connection open (see live() there). It
// passes on "open", "changed" and "error"; EventSource reconnects by
// itself.
"use strict";
(function () {
  var events = new EventSource("/api/events");
  ["open", "changed", "error"].forEach(function (name) {
    events.addEventListener(name, function () { postMessage(name); });
  });
})();
