/* mem-report.c -- the memory history told to people: a self-contained
   HTML page (gpumem --memory-report, gpumem.memory_report) with each
   device's allocated and reserved bytes over time, the peak and the
   largest live blocks with the line that made each, and the leak
   report of blocks still live at exit.  Plain C over memory.c's
   history; the installed stack hooks turn frames into text.  */

/* O_NOFOLLOW, O_CLOEXEC, ftruncate.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gm.h"
#include "pinned-pool.h"
#include "spill.h"

/* The largest live blocks a report lists.  */
#define REPORT_BLOCKS 20
/* The latest spills and returns a report lists.  */
#define REPORT_SPILLS 50
/* The most points of a device's timeline: longer histories are thinned
   evenly, the peak always kept.  */
#define REPORT_POINTS 20000

static const char *exit_report_path;
static bool exit_leaks;

void
gm_mem_report_at_exit (const char *html_path, bool leaks)
{
  exit_report_path = html_path;
  exit_leaks = leaks;
}

const char *
gm_mem_exit_report_path (void)
{
  return exit_report_path;
}

bool
gm_mem_exit_leaks (void)
{
  return exit_leaks;
}

#define NOT_REGULAR                                                      \
  "it is not a regular file (a FIFO, a device or a socket), which gpumem " \
  "does not write into (remove it, or name another file)"

int
gm_output_create (const char *path, const char **why)
{
  struct stat st;
  int fd, saved;

  /* No O_TRUNC: nothing is cut before the checks below pass.
     O_NONBLOCK: a FIFO planted at PATH fails at once (ENXIO without a
     reader) instead of waiting for one; what opens is refused below
     unless it is a regular file.  */
  fd = open (path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC
             | O_NONBLOCK, 0666);
  if (fd < 0)
    {
      saved = errno;
      *why = strerror (saved);
      if (saved == ELOOP && lstat (path, &st) == 0 && S_ISLNK (st.st_mode))
        *why = "it is a symbolic link, which gpumem does not write "
               "through (remove it, or name the file it points at)";
      else if (lstat (path, &st) == 0 && !S_ISREG (st.st_mode)
               && !S_ISDIR (st.st_mode))
        *why = NOT_REGULAR;
      errno = saved;
      return -1;
    }
  saved = 0;
  *why = NULL;
  if (fstat (fd, &st) != 0)
    saved = errno;
  else if (!S_ISREG (st.st_mode))
    {
      saved = EINVAL;
      *why = NOT_REGULAR;
    }
  else if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK) != 0)
    saved = errno;
  else if (st.st_uid != geteuid ())
    {
      saved = EPERM;
      *why = "it is another user's file, which gpumem does not write "
             "into (remove it, or name another file)";
    }
  else if (st.st_nlink > 1)
    {
      saved = EMLINK;
      *why = "it has other hard links, which gpumem does not write "
             "through (remove it, or name another file)";
    }
  else if (ftruncate (fd, 0) != 0)
    saved = errno;
  if (saved == 0)
    return fd;
  if (*why == NULL)
    *why = strerror (saved);
  close (fd);
  errno = saved;
  return -1;
}

/* Writes S as a JSON string (quotes included) safe inside a <script>.  */
static void
json_string (FILE *out, const char *s)
{
  fputc ('"', out);
  for (; *s; s++)
    {
      unsigned char c = (unsigned char) *s;
      if (c == '"' || c == '\\')
        fprintf (out, "\\%c", c);
      else if (c < 0x20 || c == '<' || c == '>' || c == '&')
        fprintf (out, "\\u%04x", c);
      else
        fputc (c, out);
    }
  fputc ('"', out);
}

/* Where STACK of COPY was made, as the hooks describe its innermost
   frame, into BUF.  */
static void
describe_stack (const gm_mem_history_copy *copy, int32_t stack, char *buf,
                size_t size)
{
  const gm_mem_stack_hooks *hooks = gm_mem_stack_hooks_get ();

  snprintf (buf, size, "(no stack recorded)");
  if (stack < 0 || (size_t) stack >= copy->nstacks || hooks == NULL)
    return;
  if (copy->stack_start[stack + 1] > copy->stack_start[stack])
    hooks->describe (&copy->frames[copy->stack_start[stack]], buf, size);
}

static int
by_size_down (const void *a, const void *b)
{
  const gm_mem_block *x = a, *y = b;

  return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/* Writes DEVICE's timeline of COPY as a JSON object.  */
static void
device_json (FILE *out, const gm_mem_history_copy *copy, int device,
             uint64_t t0)
{
  gm_pinned_stats pinned;
  gm_spill_stats spill;
  gm_mem_stats stats;
  size_t n = 0, peak_at = SIZE_MAX, peak = 0, stride, i;
  bool first = true;

  memset (&stats, 0, sizeof stats);
  memset (&spill, 0, sizeof spill);
  gm_mem_stats_get (device, &stats);
  gm_spill_stats_get (device, &spill);
  for (i = 0; i < copy->nevents; i++)
    if (copy->events[i].device == device)
      {
        n++;
        if (peak_at == SIZE_MAX || copy->events[i].allocated_bytes > peak)
          {
            peak = copy->events[i].allocated_bytes;
            peak_at = i;
          }
      }
  stride = n > REPORT_POINTS ? (n + REPORT_POINTS - 1) / REPORT_POINTS : 1;
  gm_pinned_stats_get (&pinned);
  fprintf (out, "{\"device\":%d,\"allocated_now\":%zu,\"reserved_now\":%zu,"
           "\"peak_allocated\":%zu,\"shared_now\":%zu,\"imported_now\":%zu,"
           "\"managed_now\":%zu,\"managed_cached_now\":%zu,"
           "\"pinned_reserved\":%zu,"
           "\"pinned_allocated\":%zu,\"spilled_now\":%zu,"
           "\"spill_clean_now\":%zu,"
           "\"limit\":", device, stats.allocated_bytes, stats.reserved_bytes,
           stats.peak_allocated_bytes, stats.shared_bytes,
           stats.owners[GM_MEM_OWNER_IMPORTED].allocated_bytes,
           stats.managed_bytes, stats.managed_cached_bytes,
           pinned.reserved_bytes,
           pinned.allocated_bytes, spill.spilled_bytes, spill.clean_bytes);
  if (stats.limit == SIZE_MAX)
    fputs ("null", out);
  else
    fprintf (out, "%zu", stats.limit);
  fprintf (out, ",\"history_peak\":%zu,\"history_peak_ms\":%.3f,\"points\":[",
           peak, peak_at == SIZE_MAX ? 0.0
                 : (double) (copy->events[peak_at].time_ns - t0) / 1e6);
  for (size_t k = 0, seen = 0; k < copy->nevents; k++)
    {
      const gm_mem_event *e = &copy->events[k];
      if (e->device != device)
        continue;
      if (seen++ % stride != 0 && k != peak_at && seen != n)
        continue;
      fprintf (out, "%s[%.3f,%zu,%zu]", first ? "" : ",",
               (double) (e->time_ns - t0) / 1e6, e->allocated_bytes,
               e->reserved_bytes);
      first = false;
    }
  fputs ("]}", out);
}

/* Writes the latest REPORT_SPILLS spills and returns of COPY, oldest
   first, as JSON objects.  */
static void
spills_json (FILE *out, const gm_mem_history_copy *copy, uint64_t t0)
{
  size_t first = copy->nevents, n = 0;

  while (first > 0 && n < REPORT_SPILLS)
    {
      uint8_t action = copy->events[--first].action;
      if (action == GM_MEM_ACTION_SPILL || action == GM_MEM_ACTION_RETURN)
        n++;
    }
  n = 0;
  for (size_t k = first; k < copy->nevents; k++)
    {
      const gm_mem_event *e = &copy->events[k];
      char where[512];
      if (e->action != GM_MEM_ACTION_SPILL
          && e->action != GM_MEM_ACTION_RETURN)
        continue;
      describe_stack (copy, e->stack, where, sizeof where);
      fprintf (out, "%s{\"ms\":%.3f,\"device\":%d,\"action\":\"%s\","
               "\"size\":%zu,\"where\":", n++ ? "," : "",
               (double) (e->time_ns - t0) / 1e6, e->device,
               gm_mem_action_names[e->action], e->size);
      json_string (out, where);
      fputc ('}', out);
    }
}

/* The page around the data: an inline SVG drawn by inline script, no
   file or font from elsewhere.  */
static const char page_head[] =
  "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
  "<title>gpumem memory report</title>\n<style>\n"
  "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
  "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\n"
  "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
  "padding:2px 8px;text-align:left}td.n{text-align:right}\n"
  ".alloc{stroke:#1f77b4}.res{stroke:#ff7f0e;stroke-opacity:.6}.key{font-size:12px}\n"
  "</style></head><body>\n<h1>gpumem memory report</h1>\n"
  "<div id=\"summary\"></div>\n<div id=\"timelines\"></div>\n"
  "<h2>Largest live blocks</h2>\n<table id=\"blocks\"><thead><tr>"
  "<th>size</th><th>device</th><th>owner</th><th>made at</th></tr>"
  "</thead><tbody></tbody></table>\n"
  "<h2>Spills and returns</h2>\n<p id=\"spill-note\"></p>\n"
  "<table id=\"spills\"><thead><tr><th>time</th><th>device</th>"
  "<th>event</th><th>size</th><th>at</th></tr></thead><tbody></tbody>"
  "</table>\n"
  "<script id=\"gpumem-data\" type=\"application/json\">";

static const char page_tail[] =
  "</script>\n<script>\n"
  "const data=JSON.parse(document.getElementById('gpumem-data')"
  ".textContent);\n"
  "function fmt(b){const u=['B','KiB','MiB','GiB','TiB'];let i=0;"
  "while(b>=1024&&i<u.length-1){b/=1024;i++}"
  "return (i?b.toFixed(1):b)+' '+u[i]}\n"
  "const NS='http://www.w3.org/2000/svg';\n"
  "function el(n,a,p){const e=document.createElementNS(NS,n);"
  "for(const k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);"
  "return e}\n"
  "document.getElementById('summary').textContent='Backend '+data.backend+"
  "'; '+data.events+' events recorded'+(data.dropped?' ('+data.dropped+"
  "' older ones dropped)':'')+(data.history?'':'; no history: start one "
  "with gpumem.memory_history() or GPUMEM_MEMORY_HISTORY=1')+'.';\n"
  "for(const d of data.devices){\n"
  " const box=document.createElement('div');box.className='device';\n"
  " const h=document.createElement('h2');h.textContent='Device '+d.device+"
  "': allocated and reserved over time (peak '+fmt(d.peak_allocated)+"
  "', now '+fmt(d.allocated_now)+' allocated, '+fmt(d.reserved_now)+"
  "' reserved; of the allocated, '+fmt(d.shared_now)+' shared with "
  "other processes, '+fmt(d.imported_now)+' opened from them, '+"
  "fmt(d.managed_now)+' managed ('+fmt(d.managed_cached_now)+"
  "' more freed and kept for reuse); the pinned pool: '+"
  "fmt(d.pinned_allocated)+' in use of '+fmt(d.pinned_reserved)+"
  "'; spilled to host memory: '+fmt(d.spilled_now)+', and '+"
  "fmt(d.spill_clean_now)+' of clean copies)';"
  "box.appendChild(h);\n"
  " const W=900,H=300,L=80,B=30,T=10,R=20;\n"
  " const svg=el('svg',{width:W,height:H,viewBox:'0 0 '+W+' '+H,"
  "'class':'timeline','data-device':d.device});\n"
  " const pts=d.points;let tmax=1e-3,ymax=1;\n"
  " for(const p of pts){tmax=Math.max(tmax,p[0]);"
  "ymax=Math.max(ymax,p[1],p[2])}\n"
  " const x=t=>L+(W-L-R)*t/tmax,y=v=>H-B-(H-B-T)*v/ymax;\n"
  " el('line',{x1:L,y1:H-B,x2:W-R,y2:H-B,stroke:'#888'},svg);"
  "el('line',{x1:L,y1:T,x2:L,y2:H-B,stroke:'#888'},svg);\n"
  " for(let i=0;i<=4;i++){const v=ymax*i/4;const t=el('text',{x:L-6,"
  "y:y(v)+4,'text-anchor':'end','font-size':11},svg);t.textContent=fmt(v);"
  "el('line',{x1:L,y1:y(v),x2:W-R,y2:y(v),stroke:'#eee'},svg)}\n"
  " for(let i=0;i<=4;i++){const v=tmax*i/4;const t=el('text',{x:x(v),"
  "y:H-B+16,'text-anchor':'middle','font-size':11},svg);"
  "t.textContent=tmax<2?(v*1000).toFixed(0)+' us':v.toFixed(1)+' ms'}\n"
  " function path(k,c,w){let s='';let last=0;for(const p of pts){"
  "s+=(s?'L':'M')+x(p[0]).toFixed(1)+','+y(last).toFixed(1)+'L'+"
  "x(p[0]).toFixed(1)+','+y(p[k]).toFixed(1);last=p[k]}"
  "if(s)el('path',{d:s,fill:'none','stroke-width':w,'class':c},svg)}\n"
  " path(2,'res',5);path(1,'alloc',2);\n"
  " if(pts.length){const px=x(d.history_peak_ms),py=y(d.history_peak);"
  "el('circle',{cx:px,cy:py,r:4,fill:'#d62728','class':'peak'},svg);"
  "const e=px>W-R-120;const t=el('text',{x:e?px-8:px+6,"
  "y:Math.max(py-6,T+10),'font-size':12,fill:'#d62728',"
  "'text-anchor':e?'end':'start'},svg);t.textContent='peak '+fmt(d.history_peak)}\n"
  " const k1=el('text',{x:L+10,y:T+14,'class':'key',fill:'#1f77b4'},svg);"
  "k1.textContent='allocated';"
  "const k2=el('text',{x:L+90,y:T+14,'class':'key',fill:'#ff7f0e'},svg);"
  "k2.textContent='reserved (pool)';\n"
  " box.appendChild(svg);"
  "document.getElementById('timelines').appendChild(box)}\n"
  "const tb=document.querySelector('#blocks tbody');\n"
  "for(const b of data.blocks){const tr=document.createElement('tr');"
  "for(const [v,c] of [[fmt(b.size),'n'],[b.device,'n'],[b.owner,''],"
  "[b.where,'']]){const td=document.createElement('td');td.className=c;"
  "td.textContent=v;tr.appendChild(td)}tb.appendChild(tr)}\n"
  "document.getElementById('spill-note').textContent=data.spills.length?"
  "'The latest '+data.spills.length+' (spilling, gpumem.set_spill): a "
  "spill moved an array to host memory, a return brought it back.':"
  "'None recorded.';\n"
  "const ts=document.querySelector('#spills tbody');\n"
  "for(const e of data.spills){const tr=document.createElement('tr');"
  "for(const [v,c] of [[e.ms.toFixed(3)+' ms','n'],[e.device,'n'],"
  "[e.action,''],[fmt(e.size),'n'],[e.where,'']]){"
  "const td=document.createElement('td');td.className=c;"
  "td.textContent=v;tr.appendChild(td)}ts.appendChild(tr)}\n"
  "</script>\n</body></html>\n";

gm_status
gm_mem_report_to (FILE *out)
{
  gm_mem_history_copy copy;
  gm_status status = gm_mem_history_get (&copy);
  int ndevices = gm_backend_current->device_count ();
  uint64_t t0;

  if (status != GM_OK)
    return status;
  t0 = copy.nevents ? copy.events[0].time_ns : 0;
  fputs (page_head, out);
  fputs ("{\"backend\":", out);
  json_string (out, gm_backend_current->name);
  fprintf (out, ",\"history\":%s,\"events\":%zu,\"dropped\":%zu,"
           "\"devices\":[", gm_mem_history_on () ? "true" : "false",
           copy.nevents, copy.dropped);
  for (int d = 0; d < ndevices; d++)
    {
      if (d)
        fputc (',', out);
      device_json (out, &copy, d, t0);
    }
  fputs ("],\"blocks\":[", out);
  /* (qsort may not be given NULL, even for no blocks: a history that is
     off copies none.)  */
  if (copy.nblocks > 1)
    qsort (copy.blocks, copy.nblocks, sizeof *copy.blocks, by_size_down);
  for (size_t i = 0; i < copy.nblocks && i < REPORT_BLOCKS; i++)
    {
      char where[512];
      describe_stack (&copy, copy.blocks[i].stack, where, sizeof where);
      fprintf (out, "%s{\"size\":%zu,\"device\":%d,\"owner\":\"%s\","
               "\"where\":", i ? "," : "", copy.blocks[i].size,
               copy.blocks[i].device,
               gm_mem_owner_names[copy.blocks[i].owner]);
      json_string (out, where);
      fputc ('}', out);
    }
  fputs ("],\"spills\":[", out);
  spills_json (out, &copy, t0);
  fputs ("]}", out);
  fputs (page_tail, out);
  gm_mem_history_copy_free (&copy);
  return GM_OK;
}

gm_status
gm_mem_report_write (const char *path)
{
  const char *why;
  gm_status status;
  FILE *out;
  int fd = gm_output_create (path, &why);

  if (fd < 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot write the memory "
                         "report '%s': %s", path, why);
  out = fdopen (fd, "w");
  if (out == NULL)
    {
      int saved = errno;
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot write the "
                           "memory report '%s': %s", path, strerror (saved));
    }
  status = gm_mem_report_to (out);
  if (status != GM_OK)
    {
      fclose (out);
      return status;
    }
  errno = 0;
  bool failed = ferror (out) != 0;
  if (fclose (out) != 0)
    failed = true;
  if (failed)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot write the memory "
                         "report '%s': %s", path,
                         strerror (errno ? errno : EIO));
  return GM_OK;
}

/* Writes TEXT to OUT with every control character (C0, DEL, and C1 as
   UTF-8 writes it) and backslash escaped, so that a file or function
   name cannot move the cursor, recolour or rewrite the terminal.  */
static void
print_escaped (FILE *out, const char *text)
{
  for (const unsigned char *p = (const unsigned char *) text; *p; p++)
    {
      if (*p == '\\')
        fputs ("\\\\", out);
      else if (*p == '\n')
        fputs ("\\n", out);
      else if (*p == '\t')
        fputs ("\\t", out);
      else if (*p < 0x20 || *p == 0x7f)
        fprintf (out, "\\x%02x", *p);
      else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
        {
          fprintf (out, "\\u%04x", p[1]);
          p++;
        }
      else
        fputc (*p, out);
    }
}

void
gm_mem_print_leaks (FILE *out)
{
  gm_mem_history_copy copy;

  if (!gm_mem_history_on () || gm_mem_history_get (&copy) != GM_OK)
    return;
  if (copy.nblocks > 0)
    {
      fprintf (out, "gpumem: %zu block%s allocated while the memory history "
               "was on still live at exit:\n", copy.nblocks,
               copy.nblocks == 1 ? "" : "s");
      if (copy.nblocks > 1)
        qsort (copy.blocks, copy.nblocks, sizeof *copy.blocks,
               by_size_down);
      for (size_t i = 0; i < copy.nblocks; i++)
        {
          char size[32], where[512];
          gm_format_bytes (copy.blocks[i].size, size, sizeof size);
          describe_stack (&copy, copy.blocks[i].stack, where, sizeof where);
          fprintf (out, "  %s on device %d (%s), made at ", size,
                   copy.blocks[i].device,
                   gm_mem_owner_names[copy.blocks[i].owner]);
          print_escaped (out, where);
          fputc ('\n', out);
        }
    }
  gm_mem_history_copy_free (&copy);
}
