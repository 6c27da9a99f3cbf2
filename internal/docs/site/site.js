// idem docs: show one job's panel at a time; the URL's #job-NAME names it.
(function () {
  'use strict';
  var doc = document;
  doc.documentElement.classList.add('js');
  function each(selector, fn) {
    Array.prototype.forEach.call(doc.querySelectorAll(selector), fn);
  }
  function show(id) {
    var panel = id ? doc.getElementById(id) : null;
    if (!panel || !panel.classList.contains('job')) {
      return false;
    }
    each('.job.active', function (el) { el.classList.remove('active'); });
    each('[data-job]', function (el) {
      el.classList.toggle('selected', el.getAttribute('data-job') === id);
    });
    panel.classList.add('active');
    return true;
  }
  function fromHash() {
    try {
      return decodeURIComponent(location.hash.slice(1));
    } catch (e) {
      return '';
    }
  }
  each('[data-job]', function (el) {
    el.addEventListener('click', function () { show(el.getAttribute('data-job')); });
  });
  window.addEventListener('hashchange', function () { show(fromHash()); });
  if (!show(fromHash())) {
    var first = doc.querySelector('.job');
    if (first) {
      show(first.id);
    }
  }
})();
