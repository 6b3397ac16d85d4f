// /docs: fetch the OpenAPI document with this tab's token (or the page's cookies), then render it with Swagger UI.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  var form = document.getElementById("pps-token");
  var why = document.getElementById("pps-why");
  var KEY = "pps-docs-token";

  function auth() {
    var token = sessionStorage.getItem(KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  function ask(message) {
    why.textContent = message;
    form.elements.token.focus();
  }

  function load() {
    fetch(root.dataset.openapi, { headers: auth(), credentials: "same-origin" }).then(function (r) {
      return r.json().then(function (body) { return { status: r.status, body: body }; });
    }).then(function (answer) {
      if (answer.status !== 200) {
        ask((answer.body && answer.body.message) || ("the document answered " + answer.status));
        return;
      }
      why.textContent = sessionStorage.getItem(KEY) ? "" :
        "Without a token: the operations of the entities this browser may call without one.";
      window.ui = SwaggerUIBundle({
        spec: answer.body, domNode: root, deepLinking: true,
        requestInterceptor: function (req) { Object.assign(req.headers, auth()); return req; }
      });
    }).catch(function (err) { ask("the document could not be read: " + err); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var token = form.elements.token.value.trim();
    if (token) { sessionStorage.setItem(KEY, token); } else { sessionStorage.removeItem(KEY); }
    load();
  });
  load();
})();
