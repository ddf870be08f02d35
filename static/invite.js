// invite.js: the invitation page posts its form at once. The link itself (a GET) uses nothing, so a
// mail scanner or a link preview that fetches it leaves the invitation to the guest; without
// JavaScript the guest presses the button.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var form = document.getElementById("invite");
  if (form) {
    form.submit();
  }
});
