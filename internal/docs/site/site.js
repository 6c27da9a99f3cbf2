// idem docs: show one job's panel at a time; the URL's #job-NAME names it.
// The search box finds jobs and columns by name or description, from what
// the panels show.
(function () {
  'use strict';
  var doc = document;
  doc.documentElement.classList.add('js');
  function each(selector, fn, root) {
    Array.prototype.forEach.call((root || doc).querySelectorAll(selector), fn);
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

  // The search index: an entry per job and per column of its tables, in
  // page order. rank orders the results: a job's name, a column's name,
  // then descriptions.
  var index = [];
  function text(el) { return el ? el.textContent.trim() : ''; }
  // A column in both the target's table and the input's is listed once,
  // as the target's.
  each('section.job', function (panel) {
    var job = panel.getAttribute('data-name');
    var seen = {};
    index.push({ job: panel.id, jobName: job, name: job, what: 'job', text: text(panel.querySelector('.desc')), row: null });
    each('table.columns tbody tr, table.input-columns tbody tr', function (tr) {
      var cells = tr.querySelectorAll('td');
      var name = text(cells[0]);
      if (seen[name]) {
        return;
      }
      seen[name] = true;
      index.push({ job: panel.id, jobName: job, name: name, what: 'column', text: text(cells[cells.length - 1]), row: tr });
    }, panel);
  });
  var box = doc.getElementById('search');
  var list = doc.getElementById('search-results');
  var count = doc.getElementById('search-count');
  var limit = 50;
  // rank is where entry e goes among the results for terms (every one
  // must match, in its name or its description; a term with a dot, such as
  // trips_daily.fares, matches a column's job.column), -1 when it does not.
  function rank(e, terms) {
    var name = e.name.toLowerCase();
    var all = (e.name + ' ' + e.text).toLowerCase();
    var qualified = (e.what === 'job' ? e.name : e.jobName + '.' + e.name).toLowerCase();
    for (var i = 0; i < terms.length; i++) {
      var hay = terms[i].indexOf('.') >= 0 ? qualified : all;
      if (hay.indexOf(terms[i]) < 0) {
        return -1;
      }
    }
    var inName = terms.every(function (t) { return (t.indexOf('.') >= 0 ? qualified : name).indexOf(t) >= 0; });
    if (inName) {
      return e.what === 'job' ? 0 : 1;
    }
    return 2;
  }
  function pick(e) {
    each('tr.hit', function (tr) { tr.classList.remove('hit'); });
    if (location.hash.slice(1) !== e.job) {
      location.hash = e.job;
    }
    show(e.job);
    if (e.row) {
      e.row.classList.add('hit');
      e.row.scrollIntoView({ block: 'nearest' });
    }
  }
  function search() {
    var q = box.value.trim().toLowerCase();
    while (list.firstChild) {
      list.removeChild(list.firstChild);
    }
    if (!q) {
      list.hidden = true;
      count.hidden = true;
      return;
    }
    var terms = q.split(/\s+/);
    var found = [];
    index.forEach(function (e, i) {
      var r = rank(e, terms);
      if (r >= 0) {
        found.push({ e: e, r: r, i: i });
      }
    });
    found.sort(function (a, b) { return a.r - b.r || a.i - b.i; });
    found.slice(0, limit).forEach(function (f) {
      var e = f.e;
      var li = doc.createElement('li');
      var a = doc.createElement('a');
      a.href = '#' + e.job;
      a.className = 'result';
      a.setAttribute('data-result', e.what);
      a.textContent = e.what === 'job' ? e.name : e.jobName + '.' + e.name;
      var what = doc.createElement('span');
      what.className = 'what';
      what.textContent = ' ' + e.what;
      a.appendChild(what);
      if (e.text) {
        var t = doc.createElement('span');
        t.className = 'text';
        t.textContent = e.text;
        a.appendChild(t);
      }
      a.addEventListener('click', function (ev) {
        ev.preventDefault();
        pick(e);
      });
      li.appendChild(a);
      list.appendChild(li);
    });
    count.textContent = found.length === 0 ? 'nothing found' :
      found.length > limit ? limit + ' of ' + found.length + ' found' : found.length + ' found';
    count.hidden = false;
    list.hidden = found.length === 0;
  }
  box.addEventListener('input', search);
  box.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') {
      var first = list.querySelector('a.result');
      if (first) {
        first.click();
      }
    } else if (ev.key === 'Escape') {
      box.value = '';
      search();
    }
  });
})();
